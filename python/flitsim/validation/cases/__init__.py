"""Validation cases, one module per area; every module here defines ``CASES``
and is found by name (``flitsim.validation.registry``). Add a file to add an
area; docs/validation.md says how."""
