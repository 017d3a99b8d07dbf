"""The HTTP/2 patches reach into hypercorn's private methods: on an untested hypercorn line they
refuse to install, with a message saying what to install."""

from __future__ import annotations

import hypercorn.protocol
import hypercorn.protocol.h2
import pytest
from noctaya.gateway import http2, hypercorn_version
from noctaya.gateway.hypercorn_version import UntestedHypercorn


@pytest.mark.parametrize("found", ["0.19.0", "0.17.3", "1.0", "0.18rc1", "dev"])
def test_patches_refuse_an_untested_hypercorn_and_change_nothing(
    monkeypatch: pytest.MonkeyPatch, found: str
) -> None:
    monkeypatch.setattr(hypercorn_version, "installed_hypercorn", lambda: found)
    protocol, buffer = hypercorn.protocol.H2Protocol, hypercorn.protocol.h2.StreamBuffer  # type: ignore[attr-defined]
    with pytest.raises(UntestedHypercorn) as raised:
        http2.install()
    assert str(raised.value) == (
        f"hypercorn {found} is installed, but the gateway's HTTP/2 patches are tested only with "
        "hypercorn>=0.18,<0.19; install a version in that range"
    )
    assert hypercorn.protocol.H2Protocol is protocol  # type: ignore[attr-defined]
    assert hypercorn.protocol.h2.StreamBuffer is buffer


@pytest.mark.parametrize("found", ["0.18.0", "0.18.7"])
def test_patches_install_on_the_tested_line(monkeypatch: pytest.MonkeyPatch, found: str) -> None:
    monkeypatch.setattr(hypercorn_version, "installed_hypercorn", lambda: found)
    http2.install()
    assert hypercorn.protocol.H2Protocol is http2.GatewayH2Protocol  # type: ignore[attr-defined]
