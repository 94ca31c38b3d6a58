"""Moved into the package: `python -m byteps_native.examples.hello_push_pull` runs it from anywhere.
This path keeps working for existing commands and scripts."""
import runpy

runpy.run_module("byteps_native.examples.hello_push_pull", run_name="__main__", alter_sys=True)
