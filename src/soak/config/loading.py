"""Reading YAML into the models: errors as lines that name the YAML path, `--set`
overrides, the scenario loader (the upgrade plan's loader uses the same helpers)."""

from __future__ import annotations

from difflib import get_close_matches
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from soak.config.scenario import Scenario
from soak.errors import InputError, not_utf8
from soak.load.load_config import INPUT_CONTEXT

M = TypeVar("M", bound=BaseModel)


class InvalidModel(InputError):
    """A document that does not fit its model: one line per field, `SOURCE: PATH: MESSAGE`
    (the control API answers with the fields, the command line prints the lines)."""

    def __init__(
        self, source: str, exc: ValidationError, model: type[BaseModel] | None = None
    ) -> None:
        self.fields = [
            (".".join(str(p) for p in err["loc"]) or "(top)", _message(err, model))
            for err in exc.errors()
        ]
        super().__init__("\n".join(f"{source}: {line}" for line in error_lines(self.fields)))


def _message(err: Any, model: type[BaseModel] | None) -> str:
    """pydantic's message; an unknown key gets the closest field name there."""
    message = str(err["msg"])
    loc = tuple(err["loc"])
    if err["type"] != "extra_forbidden" or model is None or not loc:
        return message
    names = field_names_at(model, loc[:-1])
    close = get_close_matches(str(loc[-1]), sorted(names), n=1, cutoff=0.6)
    return f"{message} (did you mean {close[0]}?)" if close else message


def field_names_at(model: type[BaseModel], path: tuple[Any, ...]) -> set[str]:
    """The field names (and aliases) a document may hold at `path` below `model`: each
    step is a field, a list index, a mapping key or a union's tag (which pydantic puts
    in the path and which names no field: the step is skipped)."""
    types: list[Any] = [model]
    for step in path:
        following: list[Any] = []
        for tp in _expanded(types):
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                found = _field(tp, str(step))
                following += [found] if found is not None else [tp]  # a tag: stay
            elif get_origin(tp) in (list, tuple, set) and isinstance(step, int):
                following += list(get_args(tp))
            elif get_origin(tp) is dict:
                following += list(get_args(tp))[1:]
        types = following
    names: set[str] = set()
    for tp in _expanded(types):
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            for name, info in tp.model_fields.items():
                names.add(info.alias or name)
    return names


def _field(model: type[BaseModel], step: str) -> Any:
    for name, info in model.model_fields.items():
        if step in (name, info.alias):
            return info.annotation
    return None


def _expanded(types: list[Any]) -> list[Any]:
    """Unions, Optional and Annotated opened into their members."""
    out: list[Any] = []
    for tp in types:
        if get_origin(tp) is Annotated:
            out += _expanded([get_args(tp)[0]])
        elif get_origin(tp) in (Union, UnionType):
            out += _expanded(list(get_args(tp)))
        else:
            out.append(tp)
    return out


def error_lines(fields: list[tuple[str, str]]) -> list[str]:
    """One line per field: `target.ports.dns.host: Input should be ...`."""
    return [f"{path}: {message}" for path, message in fields]


def read_yaml(path: Path) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: {not_utf8(exc)}") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, source: str) -> Any:
    """YAML (or JSON) text; an error names its source and line."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise InputError(
            f"{source}:{where} not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from exc


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """`--set load.rate_qps=500`: assign into nested dicts (and list indexes)."""
    keys = dotted.split(".")
    node: Any = data
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def validate_model(model: type[M], data: Any, source: str) -> M:
    try:
        return model.model_validate(data, context=INPUT_CONTEXT)
    except ValidationError as exc:
        raise InvalidModel(source, exc, model) from exc


def load_scenario(path: Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    return scenario_from_data(read_yaml(path), str(path), Path(path).resolve().parent, overrides)


def scenario_from_data(
    data: Any, source: str, base_dir: Path, overrides: list[str] | tuple[str, ...] = ()
) -> Scenario:
    """A scenario from its parsed YAML (a file's or a request body's); its relative file
    names are relative to `base_dir`."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: a scenario is a YAML mapping")
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InputError(f"--set takes key.path=value, got {item!r}")
        set_path(data, key, override_value(raw))
    scenario = validate_model(Scenario, data, source)
    scenario._base_dir = base_dir
    return scenario


def override_value(raw: str) -> Any:
    """A `--set` value as YAML (`3`, `[a, b]`, `{all: 50}`); text that is not YAML, such
    as `{run_dir}/x.conf` (a placeholder read as a flow mapping), is the text itself."""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def is_upgrade_plan(data: Any) -> bool:
    return isinstance(data, dict) and "old" in data and "new" in data
