# The adapted TensorFlow files (*_test.py) run as programs under TensorFlow's
# multi_process_runner (see run_upstream.py), never inside pytest.
collect_ignore_glob = ["*_test.py", "upstream_test"]
