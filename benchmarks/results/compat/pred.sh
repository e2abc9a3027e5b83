# run from the checkout
export PATH=/work/main/.tools/bin:$PATH STACKGATE_CACHE=/tmp/compat27-cache-root
A="--against torch==2.8.0 --against torch==2.9.1 --against torch==2.10.0"
run() { name=$1; shift; /usr/bin/time -f "%e s %M KB" .venv/bin/python -m validators compat $name "$@" $A --json > benchmarks/results/compat/pred-$name.json 2>benchmarks/results/compat/pred-$name.err; }
run torchvision --versions ==0.23.0 --versions ==0.24.1 --versions ==0.25.0
run torchaudio --versions ==2.8.0 --versions ==2.9.1 --versions ==2.10.0
run xformers --versions ==0.0.32.post2 --versions ==0.0.33.post2 --versions ==0.0.34 --versions ==0.0.35
run torchao --versions ==0.13.0 --versions ==0.14.1 --versions ==0.15.0
run torch-memory-saver --versions ==0.0.8 --versions ==0.0.9
run sgl-kernel --versions ==0.3.9.post2 --versions ==0.3.16.post5 --versions ==0.3.21
