"""Exposing the endpoint: the Ingress and the Gateway API route on the page reach the gateway
Service the renderer gives the a10 example, by its name and port, and the API key the page
turns on is the one the renderer mounts into the gateway."""

from __future__ import annotations

import ast
import inspect
import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml
from noctaya.gateway.process.config import DEFAULT_BACKEND_READ_TIMEOUT, DEFAULT_MAX_REQUEST_BODY
from noctaya.gateway.requests.app import GatewayApp
from noctaya.gateway.requests.responses import is_openai_path

from .rendering import rendered

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "exposing.md"
INGRESS = REPO / "docs" / "snippets" / "ingress-nginx.yaml"
GATEWAY_API = REPO / "docs" / "snippets" / "gateway-api.yaml"
EXAMPLE = REPO / "examples" / "nvidia" / "a10"
NAMESPACE = "ai"
_NGINX_SIZE = {"": 1, "k": 1024, "m": 1024 * 1024, "g": 1024**3}


def text() -> str:
    return PAGE.read_text(encoding="utf-8")


def flat() -> str:
    return " ".join(text().split())


def documents(path: Path) -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(path.read_text()) if doc}


def example() -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted(EXAMPLE.glob("*.yaml"))]


def render(manifests: list[dict[str, Any]], tmp_path: Path) -> dict[tuple[str, str], Any]:
    source = tmp_path / "service.yaml"
    source.write_text(yaml.safe_dump_all(manifests))
    return rendered([source], NAMESPACE)


def service_name() -> str:
    (service,) = [doc for doc in example() if doc["kind"] == "LLMService"]
    return str(service["metadata"]["name"])


def gateway_service(objects: dict[tuple[str, str], Any]) -> dict[str, Any]:
    """The Service in front of the gateway pods that serves HTTP (the scaler's is gRPC)."""
    gateway = objects["Deployment", f"{service_name()}-gateway"]
    pod_labels = gateway["spec"]["template"]["metadata"]["labels"]
    (found,) = [
        obj
        for (kind, _), obj in objects.items()
        if kind == "Service"
        and obj["spec"]["selector"].items() <= pod_labels.items()
        and any(port["name"] == "http" for port in obj["spec"]["ports"])
    ]
    return dict(found)


def gateway_env(objects: dict[tuple[str, str], Any]) -> dict[str, str]:
    gateway = objects["Deployment", f"{service_name()}-gateway"]
    (container,) = gateway["spec"]["template"]["spec"]["containers"]
    return {env["name"]: env.get("value", "") for env in container["env"]}


def test_the_pages_yaml_is_the_two_snippet_files() -> None:
    for path in (INGRESS, GATEWAY_API):
        assert f'--8<-- "{path.relative_to(REPO)}"' in text()


def test_the_ingress_reaches_the_rendered_gateway_service_by_name_and_port(
    tmp_path: Path,
) -> None:
    service = gateway_service(render(example(), tmp_path))
    (port,) = service["spec"]["ports"]
    ingress = documents(INGRESS)["Ingress"]
    assert ingress["apiVersion"] == "networking.k8s.io/v1"
    assert ingress["metadata"]["namespace"] == NAMESPACE == service["metadata"]["namespace"]
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    backend = path["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
    assert backend["port"] == {"number": port["port"]}
    assert (path["path"], path["pathType"]) == ("/v1", "Prefix")
    (tls,) = ingress["spec"]["tls"]
    assert tls["hosts"] == [rule["host"]]
    assert f"kubectl -n {NAMESPACE} create secret tls {tls['secretName']} " in text()


def test_the_http_route_reaches_the_same_service_through_the_gateways_tls_listener(
    tmp_path: Path,
) -> None:
    service = gateway_service(render(example(), tmp_path))
    (port,) = service["spec"]["ports"]
    found = documents(GATEWAY_API)
    gateway, route = found["Gateway"], found["HTTPRoute"]
    for doc in (gateway, route):
        assert doc["apiVersion"] == "gateway.networking.k8s.io/v1"
        assert doc["metadata"]["namespace"] == NAMESPACE
    (listener,) = gateway["spec"]["listeners"]
    assert (listener["protocol"], listener["port"]) == ("HTTPS", 443)
    assert listener["tls"]["mode"] == "Terminate"
    (certificate,) = listener["tls"]["certificateRefs"]
    (tls,) = documents(INGRESS)["Ingress"]["spec"]["tls"]
    assert certificate["name"] == tls["secretName"]  # "the same Secret"
    (parent,) = route["spec"]["parentRefs"]
    assert parent == {"name": gateway["metadata"]["name"], "sectionName": listener["name"]}
    assert route["spec"]["hostnames"] == [listener["hostname"]] == tls["hosts"]
    (rule,) = route["spec"]["rules"]
    (match,) = rule["matches"]
    assert match["path"] == {"type": "PathPrefix", "value": "/v1"}
    (backend,) = rule["backendRefs"]
    assert backend == {"name": service["metadata"]["name"], "port": port["port"]}
    assert rule["timeouts"] == {"request": "0s"}
    assert '`timeouts.request: "0s"`' in text()


def test_only_the_openai_api_is_routed_not_the_unauthenticated_routes() -> None:
    assert is_openai_path("/v1")
    assert is_openai_path("/v1/chat/completions")
    for unauthenticated in ("/healthz", "/metrics", "/noctaya/queue"):
        assert not is_openai_path(unauthenticated)
        assert f'path == "{unauthenticated}"' in inspect.getsource(GatewayApp.answer)
        assert f"`{unauthenticated}`" in text()


def test_the_annotations_let_long_silences_events_and_the_gateways_bodies_through() -> None:
    annotations = documents(INGRESS)["Ingress"]["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    (service,) = [doc for doc in example() if doc["kind"] == "LLMService"]
    activation = service["spec"]["scaling"]["activationTimeout"]
    assert activation.endswith("m")
    read_timeout = int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"])
    assert read_timeout > int(activation[:-1]) * 60 + DEFAULT_BACKEND_READ_TIMEOUT.seconds
    size = re.fullmatch(
        r"(\d+)([kmg]?)", annotations["nginx.ingress.kubernetes.io/proxy-body-size"]
    )
    assert size
    assert int(size[1]) * _NGINX_SIZE[size[2]] == DEFAULT_MAX_REQUEST_BODY
    assert "(8Mi by default" in flat()
    assert DEFAULT_MAX_REQUEST_BODY == 8 * 1024 * 1024


def test_the_table_is_the_rendered_service_its_endpoint_and_served_model(tmp_path: Path) -> None:
    objects = render(example(), tmp_path)
    service = gateway_service(objects)
    (port,) = service["spec"]["ports"]
    name = service_name()
    assert "type" not in service["spec"]  # ClusterIP, Kubernetes' default
    assert f"| Service | `{name}`, named like the `LLMService`, type `ClusterIP` |" in text()
    row = f"| Port | `{port['port']}`, named `{port['name']}`, to the gateway pods' port"
    assert f"{row} `{port['targetPort']}` |" in text()
    assert f"`http://{name}.{NAMESPACE}.svc/v1`, the service's `status.endpointURL`" in text()
    assert json.loads(gateway_env(objects)["NOCTAYA_SERVED_MODELS"]) == [name]
    assert f"| Model name | `{name}`, the service's name" in text()


def test_the_api_key_the_page_turns_on_is_mounted_into_the_gateway(tmp_path: Path) -> None:
    commands = " ".join(text().replace("\\\n", " ").split())
    created = re.search(
        r"kubectl -n (\S+) create secret generic (\S+) --from-literal=(\w+)=", commands
    )
    assert created
    patch = re.search(
        r"kubectl -n (\S+) patch llmservice (\S+) --type=merge -p '([^']+)'", commands
    )
    assert patch
    assert created[1] == patch[1] == NAMESPACE
    assert patch[2] == service_name()
    reference = json.loads(patch[3])["spec"]["endpoint"]["authentication"]["secretRef"]
    assert reference == {"name": created[2], "key": created[3]}

    manifests = example()
    for doc in manifests:
        if doc["kind"] == "LLMService":
            doc["spec"].setdefault("endpoint", {})["authentication"] = {"secretRef": reference}
    objects = render(manifests, tmp_path)
    assert "NOCTAYA_CLIENT_API_KEY_FILE" in gateway_env(objects)
    pod = objects["Deployment", f"{service_name()}-gateway"]["spec"]["template"]["spec"]
    secrets = [volume["secret"] for volume in pod["volumes"] if "secret" in volume]
    assert [(s["secretName"], s["items"][0]["key"]) for s in secrets] == [
        (reference["name"], reference["key"])
    ]
    assert f"get secret {created[2]} -o jsonpath='{{.data.{created[3]}}}'" in commands


def test_a_refused_request_is_never_demand_and_its_key_never_reaches_the_engine() -> None:
    serve = inspect.getsource(GatewayApp._serve)
    assert serve.index("self.authorized(") < serve.index("self.demand.try_admit()")
    assert "strip_authorization=self.auth is not None" in inspect.getsource(GatewayApp.__init__)


def test_the_clients_call_the_ingress_host_with_the_served_model_and_the_key() -> None:
    (rule,) = documents(INGRESS)["Ingress"]["spec"]["rules"]
    base_url = f"https://{rule['host']}/v1"
    (curl,) = [line for line in text().splitlines() if line.startswith("curl ")]
    assert shlex.split(curl.rstrip("\\"))[2] == f"{base_url}/chat/completions"
    assert '-H "Authorization: Bearer $NOCTAYA_API_KEY"' in text()
    assert f'"model": "{service_name()}"' in text()

    (python,) = re.findall(r"^```python\n(.*?)^```$", text(), re.DOTALL | re.MULTILINE)
    tree = ast.parse(python)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    (client,) = [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "OpenAI"]
    keywords = {keyword.arg: keyword.value for keyword in client.keywords}
    assert ast.literal_eval(keywords["base_url"]) == base_url
    assert "NOCTAYA_API_KEY" in ast.unparse(keywords["api_key"])
    models = [k.value for c in calls for k in c.keywords if k.arg == "model"]
    assert [ast.literal_eval(model) for model in models] == [service_name()]
