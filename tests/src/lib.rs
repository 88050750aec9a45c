//! Integration tests for gpu-pipeline live in `tests/tests/`; shared helpers go here.
