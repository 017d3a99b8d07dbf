"""`python -m noctaya.gateway.local FILE.yaml`: the same as `noctaya-local`."""

from noctaya.gateway.local.cli import main

raise SystemExit(main())
