"""The backend as the gateway sees it: whether it is ready (`readiness`, polled while requests are
held), its pods (`endpoints`, a watch of its EndpointSlices through `kube_api`) and the choice
among them (`replicas`)."""
