"""Plan an LLMService with noctaya.core alone: no cluster, no HTTP, just the typed domain API.

Run from the repository root: `python docs/snippets/plan_a_service.py examples/nvidia/a10`.
"""

import sys
from pathlib import Path

import yaml
from noctaya.core.api import InvalidResource, parse_inferenceruntime, parse_llmservice
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import resolve_model
from noctaya.core.plan.serving import plan_serving
from noctaya.core.plugins import VendorRegistry


def main(directory: Path) -> int:
    documents = [
        document
        for path in sorted(directory.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if document
    ]
    try:
        runtime = parse_inferenceruntime(
            next(d for d in documents if d["kind"] == "InferenceRuntime")
        )
        service = parse_llmservice(next(d for d in documents if d["kind"] == "LLMService"))
    except InvalidResource as invalid:  # every problem, one `path: rule` line each
        print("\n".join(invalid.problems), file=sys.stderr)
        return 1
    service.metadata.namespace = service.metadata.namespace or "default"
    try:
        adapter = VendorRegistry.discover().adapter(runtime.spec.vendor)
        source = service.spec.model.source
        model = resolve_model(source.uri if source else None)
        plan = plan_serving(
            service,
            runtime,
            adapter,
            model,
            gateway_image="noctaya-gateway:dev",
            gateway_replicas=1,
        )
    except NoctayaError as error:  # the reason and message the operator would report
        print(f"{error.reason}: {error.message}", file=sys.stderr)
        return 1
    print(f"service   {plan.service.namespace}/{plan.service.name} -> {plan.service.endpoint_url}")
    print(f"runtime   {plan.runtime}: {plan.backend.image}")
    print(f"args      {' '.join(plan.backend.args)}")
    print(f"devices   {dict(plan.backend.limits)}")
    print(f"replicas  {plan.autoscaling.min_replicas}..{plan.autoscaling.max_replicas}")
    print(f"gateway   queue {plan.gateway.max_queue}, cold start {plan.gateway.cold_start_mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "examples/nvidia/a10")))
