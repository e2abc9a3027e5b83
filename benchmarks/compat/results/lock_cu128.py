# How benchmarks/compat/results/lock_cu128.jsonl was measured (from the checkout; the cache
# folder held torch 2.9.1's closure from the compat runs, the rest of the lock cold).
# The cache is the one every stackgate cache uses: $STACKGATE_CACHE/lockcheck (stackgate.torch_abi.facts_root).
import json
import time
from pathlib import Path

from stackgate.torch_abi import facts_root

from validators.elf.facts_cache import FactsCache
from validators.torch_abi.lock_verdict import check_lock

cache = FactsCache(facts_root())
for i in range(2):
    t = time.perf_counter()
    r = check_lock(Path("stacks/locks/cu128/uv.lock"), cache)
    print(
        json.dumps(
            {
                "run": i,
                "wall_s": round(time.perf_counter() - t, 2),
                "torch": r.torch,
                "from_cache": r.from_cache,
                "bytes_fetched": r.bytes_fetched,
                "pairs": [
                    (p.package, p.version, p.verdict, p.kind, (p.first or p.reason)[:150])
                    for p in r.pairs
                ],
                "alternatives": r.alternatives,
                "note": r.note,
            }
        ),
        flush=True,
    )
