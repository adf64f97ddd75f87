"""One CUDA client of two processes, which find each other through
torch.distributed's TCPStore (PJRT's key-value callbacks). CUDA only: the
CPU plugin makes no clients of several processes. On one GPU both processes
use it, each as its own node's device."""
import json
import os
import socket
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by scripts/gpu-check)")

WORKER = """
import json, sys
import torch.distributed as dist
import cuxla.torch
rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
client = cuxla.torch.distributed_client()
print(json.dumps({"rank": rank, "local": [d.id for d in client.devices()],
                  "global": client.global_device_count, "options": client.options}), flush=True)
dist.barrier()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_form_one_client_through_torch_distributed_store():
    port, world = _free_port(), 2
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(rank), str(world), str(port)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
               for rank in range(world)]
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=150)
        assert worker.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    print(results)
    assert [r["global"] for r in results] == [world, world]
    assert all(len(r["local"]) == 1 for r in results)
    assert sorted(r["local"][0] for r in results) == list(range(world))  # distinct global ids
    assert [r["options"]["node_id"] for r in results] == [0, 1]
