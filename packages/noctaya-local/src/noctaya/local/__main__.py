"""`python -m noctaya.local FILE.yaml`: the same as `noctaya-local`."""

from noctaya.local.cli import main

raise SystemExit(main())
