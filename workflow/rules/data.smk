# Datasets for training cells, prepared once into one framework-neutral file each
# (uint8 NHWC images, labels, train/validation split, checksums in a JSON sidecar), so
# every framework trains on the same bytes.


rule prepare_digits:
    """The digits dataset at one image size, prepared once into one .npz file."""
    output:
        f"{DATA}/digits-{{size}}.npz",
    log:
        f"{DATA}/logs/digits-{{size}}.log",
    localrule: True
    resources:
        bench_slot=1,  # it can start while cells measure: never beside one (a cell takes 2)
    params:
        out_dir=lambda wc, output: Path(output[0]).parent,
    shell:
        "$DPSCALE_PYTHON -m dpscale.launch.setup.dataprep prepare digits --out {params.out_dir}"
        " --image-size {wildcards.size} > {log} 2>&1"


rule prepare_cifar10:
    """CIFAR-10 (downloaded, or from train.cifar10_source), prepared once into one .npz file."""
    output:
        f"{DATA}/cifar10.npz",
    log:
        f"{DATA}/logs/cifar10.log",
    localrule: True
    resources:
        bench_slot=1,  # it can start while cells measure: never beside one (a cell takes 2)
    params:
        out_dir=lambda wc, output: Path(output[0]).parent,
        source=cifar10_source_args,
    shell:
        "$DPSCALE_PYTHON -m dpscale.launch.setup.dataprep prepare cifar10 --out {params.out_dir}"
        " {params.source} > {log} 2>&1"
