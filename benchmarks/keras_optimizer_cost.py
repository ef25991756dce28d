"""What does the horovod-tf runner's optimizer cost per step, against Horovod's reference?

    .venv/bin/python benchmarks/keras_optimizer_cost.py [--rounds 10] [--applies 20]

In the tf-horovod environment, one process, 1 intra-op and 1 inter-op thread (as a runner
rank): dpscale's ResNet-18 (imagenet stem, 64 px, 10 classes), fixed random gradients, and
``apply_gradients`` in a ``tf.function`` for each optimizer, interleaved round by round:

- reference: ``SGD(0.01)`` (Horovod's tensorflow2_synthetic_benchmark.py);
- momentum: ``SGD(0.01, momentum=0.9)``;
- runner: ``SGD(0.01, momentum=0.9, weight_decay=5e-5)`` (dpscale's synthetic step: Keras'
  decoupled decay, one more pass over every variable);
- l2_in_gradient: momentum 0.9 and ``g + 5e-5 w`` added to the gradients (torch's L2);
- legacy_momentum / legacy_momentum_l2: ``tf.keras.optimizers.legacy.SGD(0.01,
  momentum=0.9)``, whose update is one fused kernel per variable
  (``ResourceApplyKerasMomentum``), without and with the L2 term in the gradients;
- fused_decoupled: the legacy fused momentum plus Keras' decoupled decay ``w -= lr wd w``
  as one in-place ``ResourceApplyGradientDescent`` per variable (the runner's maths).

Prints milliseconds per apply (median over rounds); compare with the step time.
"""

import argparse
import os
import subprocess
import sys
import time

import page

WORKER = r"""
import statistics, sys, time
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
from dpscale.frameworks.keras_resnet import build_keras_resnet
from dpscale.plan.resnet_spec import resnet_spec
rounds, applies = int(sys.argv[1]), int(sys.argv[2])
model = build_keras_resnet(resnet_spec("resnet18", "imagenet", 64, 10))
variables = model.trainable_variables
grads = [tf.random.normal(v.shape) * 1e-3 for v in variables]
SGD = tf.keras.optimizers.SGD
optimizers = {
    "reference": SGD(0.01),
    "momentum": SGD(0.01, momentum=0.9),
    "runner": SGD(0.01, momentum=0.9, weight_decay=5e-5),
    "l2_in_gradient": SGD(0.01, momentum=0.9),
    "legacy_momentum": tf.keras.optimizers.legacy.SGD(0.01, momentum=0.9),
    "legacy_momentum_l2": tf.keras.optimizers.legacy.SGD(0.01, momentum=0.9),
    "fused_decoupled": tf.keras.optimizers.legacy.SGD(0.01, momentum=0.9),
}
def make(name, opt):
    l2 = name in ("l2_in_gradient", "legacy_momentum_l2")
    @tf.function(jit_compile=False)
    def apply():
        g = [gi + 5e-5 * v for gi, v in zip(grads, variables)] if l2 else grads
        if name == "fused_decoupled":  # w -= lr wd w, one in-place kernel per variable
            for v in variables:
                tf.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=0.01 * 5e-5, delta=v)
        opt.apply_gradients(zip(g, variables))
        return tf.constant(0)
    return apply
fns = {name: make(name, opt) for name, opt in optimizers.items()}
for fn in fns.values():
    fn().numpy()
times = {name: [] for name in fns}
names = list(fns)
for r in range(rounds):
    for name in names[r % len(names):] + names[:r % len(names)]:
        start = time.perf_counter()
        for _ in range(applies):
            fns[name]().numpy()
        times[name].append((time.perf_counter() - start) / applies)
for name, t in times.items():
    print(f"{name:16s} {1000 * statistics.median(t):7.2f} ms per apply")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--applies", type=int, default=20)
    parser.add_argument("--env-dir", default=".envs")
    page.add_page_option(parser)
    args = parser.parse_args()
    run = page.describe_run()
    from dpscale.launch.setup.envs import env_prefix
    from dpscale.plan.paths import SRC_DIR

    python = env_prefix("tf-horovod", args.env_dir) / "bin" / "python"
    env = dict(os.environ, PYTHONPATH=str(SRC_DIR), OMP_NUM_THREADS="1")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    done = subprocess.run(
        [str(python), "-c", WORKER, str(args.rounds), str(args.applies)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    print(f"{started}\n{done.stdout}", end="")
    rows = [line.split()[:2] for line in done.stdout.splitlines() if "ms per apply" in line]
    caption = (
        "tf-horovod environment, 1 process, 1 intra-op and 1 inter-op thread; ms per "
        f"apply_gradients: median over {args.rounds} rounds of {args.applies} applies."
    )
    table = page.table(["optimizer", "ms per apply"], rows)
    page.print_page("Keras optimizer cost per apply", [caption, table], run, path=args.page)


if __name__ == "__main__":
    main()
