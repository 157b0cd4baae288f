from kvset.cli import main

raise SystemExit(main())
