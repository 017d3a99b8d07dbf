"""The processes of `noctaya-gateway` and how they are configured: the command (`cli`), each
mode's entry (`gateway_main`, `noctaya.gateway.aggregator.main`), the gateway process and its
drain (`gateway_server`), the `NOCTAYA_*` settings (`config`, `config_shared`, and `variables`,
the table the manual's settings page is written from), the event loop and logging (`running`).
"""
