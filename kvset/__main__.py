from kvset.cli import main

# Guarded so that importing kvset.__main__ (the layering test walks every module) does not run the CLI.
if __name__ == "__main__":
    raise SystemExit(main())
