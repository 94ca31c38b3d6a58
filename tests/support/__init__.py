"""What every suite (and the benchmarks on emulated hosts) shares, one concept a module:

- `paths`     -- where the repository, the vendored upstream suites (third_party) and the engine library are
- `ports`     -- the one free-port allocator
- `processes` -- one process of a job: its own session, a log file, optionally in a network namespace
- `jobs`      -- the job launcher: role by role (scheduler, servers, workers), bpslaunch,
                 torchrun (one or several "machines") and bare env:// ranks
- `results`   -- how a worker reports to the test (`report`) and how the test reads it (`collect`)
- `netns`     -- emulated hosts: network namespaces on a shaped bridge, and the
                 benchmarks' run loop over them (`measure_cells`)

Imported as `tests.support.<module>`: the repository root is on sys.path under pytest
(pyproject.toml's `pythonpath`) and in every job this launches (PYTHONPATH).
"""
