# Written on the device machine in the call after the driver finished (verbatim), run with
# setsid while the machine was held: the mark-good of the driver was refused for correctness
# SKIPs (no greedy reference); this records one and makes two more runs with it.
cd /tmp/sg/repo; export PYTHONPATH=/tmp/site:/tmp/sg/repo PATH=/tmp/site/bin:$PATH STACKGATE_STATE_DIR=/tmp/sg/state STACKGATE_VENV_ROOT=/tmp/sg/envs NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
E=/tmp/sg/envs/h200-sglang/current; R=/tmp/sg/r2; mkdir -p $R
sed -i '/^served_model_name = "kimi-mini"/a correctness_reference = "references/h200-sglang-kimi-mini.json"' stacks/h200-sglang.toml
s=$(date +%s); python3 -m validators serve-bench h200-sglang --env $E --record-reference stacks/references/h200-sglang-kimi-mini.json --out-dir /tmp/sg/out/ref --json > $R/ref.json 2> $R/ref.err; echo ref $? $(( $(date +%s)-s )) s >> $R/log
cp stacks/references/h200-sglang-kimi-mini.json $R/
for i in 1 2; do s=$(date +%s); python3 -m validators run h200-sglang --env $E --keep-going --json --out-dir /tmp/sg/out/r2-$i > $R/run-$i.json 2> $R/run-$i.err; echo run $i $? $(( $(date +%s)-s )) s >> $R/log; done
python3 -m validators mark-good h200-sglang --run $R/run-1.json --run $R/run-2.json --env $E --export $R/records --json > $R/mg.json 2> $R/mg.err; echo mg $? >> $R/log
cp /tmp/sg/out/r2-1/serve-logs/*.log $R/ 2>/dev/null
tar czf /tmp/sg/r2.tgz -C /tmp/sg r2 res; touch $R/done
