"""The gateway settings page covers every `NOCTAYA_*` variable, with the defaults the parsers use.

The page is generated from the declarations in the gateway's config modules (its currency is
checked in test_generated_pages); these tests tie the declarations to the code that reads the
environment, so a variable added there without its declaration fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from noctaya.core.plan import gateway_env
from noctaya.gateway.aggregator.config import load_config as load_aggregator_config
from noctaya.gateway.process.config import load_config as load_gateway_config
from noctaya.gateway.process.variables import AGGREGATOR_SETTINGS, GATEWAY_SETTINGS

REPO = Path(__file__).resolve().parents[2]
GATEWAY_SOURCES = REPO / "packages" / "noctaya-gateway" / "src"
VARIABLE = re.compile(r"\bNOCTAYA_[A-Z][A-Z0-9_]*\b")
DECLARED = {setting.name for setting in (*GATEWAY_SETTINGS, *AGGREGATOR_SETTINGS)}


def test_every_variable_of_the_contract_is_declared_for_the_page() -> None:
    contract = {
        value
        for value in vars(gateway_env).values()
        if isinstance(value, str) and VARIABLE.fullmatch(value)
    }
    assert contract - DECLARED == set(), "add a Setting to variables.py"
    assert DECLARED - contract == set(), "a declared variable the contract does not name"


def test_every_variable_the_gateway_sources_name_is_declared() -> None:
    named = {
        f"{path.relative_to(REPO)}: {found}"
        for path in sorted(GATEWAY_SOURCES.rglob("*.py"))
        for found in VARIABLE.findall(path.read_text(encoding="utf-8"))
        if found not in DECLARED
    }
    assert named == set()


def test_each_mode_declares_a_variable_once() -> None:
    for settings in (GATEWAY_SETTINGS, AGGREGATOR_SETTINGS):
        names = [setting.name for setting in settings]
        assert len(names) == len(set(names))


def test_the_gateway_reads_each_documented_default_as_its_own_default() -> None:
    backend = {gateway_env.BACKEND_URL: "http://127.0.0.1:8000"}
    unset = load_gateway_config(backend)
    for setting in GATEWAY_SETTINGS:
        if setting.default:
            spelled = load_gateway_config({**backend, setting.name: setting.default})
            assert spelled == unset, setting.name


def test_the_aggregator_reads_each_documented_default_as_its_own_default(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t" * 43)
    required = {gateway_env.DEMAND_AUTH_TOKEN_FILE: str(token)}
    unset = load_aggregator_config(required)
    for setting in AGGREGATOR_SETTINGS:
        if setting.default:
            spelled = load_aggregator_config({**required, setting.name: setting.default})
            assert spelled == unset, setting.name
