"""The box's dynamic storage: local-path-provisioner, run as its own Deployment, with two
StorageClasses.

- `local-path` (the default class): ReadWriteOnce volumes in a folder of the node the first
  consumer lands on (`layout.LOCAL_VOLUMES_FOLDER`, private to each node), each PersistentVolume
  carrying node affinity to that node, as local disks do on real clusters
  (`WaitForFirstConsumer`).
- `shared-path`: ReadWriteMany volumes in one folder every node sees (`Folders.shared_volumes`,
  under the box's folder on the host): what an NFS, CephFS or cloud file-store class gives a
  real cluster. These machines have no NFS kernel support; the shared folder stands for one.

Both create and remove volume folders through helper pods of the box image (`sh`, `mkdir`, `rm`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from . import components, layout

NAMESPACE = "local-path-storage"
PROVISIONER = "rancher.io/local-path"
NODE_LOCAL_CLASS = "local-path"
SHARED_CLASS = "shared-path"
_ACCOUNT = "local-path-provisioner"


def storage_manifests(shared_folder: Path) -> list[dict[str, Any]]:
    meta = {"name": _ACCOUNT, "namespace": NAMESPACE}
    labels = {"app": _ACCOUNT}
    every_node = "DEFAULT_PATH_FOR_NON_LISTED_NODES"
    config = {
        "storageClassConfigs": {
            NODE_LOCAL_CLASS: {
                "nodePathMap": [{"node": every_node, "paths": [layout.LOCAL_VOLUMES_FOLDER]}]
            },
            SHARED_CLASS: {"sharedFileSystemPath": str(shared_folder)},
        }
    }
    helper_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {"containers": [{"name": "helper-pod", "image": components.BOX_IMAGE}]},
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            # The box tests Noctaya's behaviour, not the provisioner's authorization set-up.
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": _ACCOUNT},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", **meta}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "local-path-config", "namespace": NAMESPACE},
            "data": {
                "config.json": json.dumps(config, indent=2),
                "setup": '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
                "teardown": '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n',
                "helperPod.yaml": yaml.safe_dump(helper_pod),
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {**meta, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": _ACCOUNT,
                        "containers": [
                            {
                                "name": "provisioner",
                                "image": components.LOCAL_PATH_IMAGE,
                                "imagePullPolicy": "IfNotPresent",
                                "args": [
                                    "start",
                                    "--config=/etc/config/config.json",
                                    f"--service-account-name={_ACCOUNT}",  # its helper pods'
                                ],
                                "env": [
                                    {
                                        "name": "POD_NAMESPACE",
                                        "valueFrom": {
                                            "fieldRef": {"fieldPath": "metadata.namespace"}
                                        },
                                    },
                                ],
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/config/"}],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "local-path-config"}}],
                    },
                },
            },
        },
        _storage_class(NODE_LOCAL_CLASS, "WaitForFirstConsumer", default=True),
        _storage_class(SHARED_CLASS, "Immediate", default=False),
    ]


def _storage_class(name: str, binding: str, *, default: bool) -> dict[str, Any]:
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "annotations": annotations},
        "provisioner": PROVISIONER,
        "volumeBindingMode": binding,
        "reclaimPolicy": "Delete",
    }
