"""The request path: what the gateway does with a client's request, in the order it happens.

`app` routes it (diagnostics, the model list), checks its key (`auth`), reads its body within
its limit and deadline (`client`, `client_endpoint`, `exchange`), admits it to the bounded queue
or refuses it with 429 (`admission`), forwards it to a ready backend (`proxy`), or holds it while
the backend starts (`coldstart`, with the activation lease of `activation`); `responses` holds
every answer the gateway writes itself.
"""
