"""The tool-call env: bundled tool suites and BFCL (`bfcl/`), calls parsed, validated and run (`tools/`)."""
