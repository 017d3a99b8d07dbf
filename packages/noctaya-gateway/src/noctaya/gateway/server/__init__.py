"""hypercorn serving the gateway's apps: its configuration (`hypercorn_config`), the listening
socket (`listen_socket`), hypercorn imported without modules no mode uses (`lean_import`), and
`patches`: every change Noctaya makes to hypercorn, h2, h11 and asyncio, with its ledger,
installed only on the releases `tested_versions` names.
"""
