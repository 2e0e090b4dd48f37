import sys
from pathlib import Path

# tests/support is imported as `tests.support`; the repository root must be importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
