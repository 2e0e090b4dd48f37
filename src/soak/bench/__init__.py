"""`soak bench` and `soak compare`: the seeds' measurement method, and old against new.

Pure maths (knee search, statistics, limits, verdicts) lives in knee.py,
stats.py, limits.py and compare.py; runner.py and measure.py do the I/O
(targets, load, /proc); render.py lays the result out like the seeds' tables.
"""
