"""The test suite. `tests.support` is what every suite shares: ports,
processes, the job launcher and the result protocol (see tests/README.md)."""
