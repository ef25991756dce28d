import pytest

from dpscale.plan.resnet_spec import DEPTHS, parity_specs, resnet_spec

# torchvision's ResNets (v1.5), trainable parameters (torchvision.models.resnetNN)
TORCHVISION_PARAMS = {
    ("resnet18", 1000): 11_689_512,
    ("resnet50", 1000): 25_557_032,
    ("resnet101", 1000): 44_549_160,
    ("resnet18", 10): 11_181_642,
    ("resnet50", 10): 23_528_522,
    ("resnet101", 10): 42_520_650,
}
# torchvision's documented GMACs at 224 px ("GFLOPS" in its tables count multiply-adds)
TORCHVISION_GMACS = {"resnet18": 1.81, "resnet50": 4.09, "resnet101": 7.80}


@pytest.mark.parametrize(("name", "classes"), sorted(TORCHVISION_PARAMS))
def test_trainable_params_match_torchvision(name, classes):
    assert (
        resnet_spec(name, classes=classes).trainable_params() == TORCHVISION_PARAMS[(name, classes)]
    )


@pytest.mark.parametrize("name", sorted(TORCHVISION_GMACS))
def test_forward_flops_match_published_macs(name):
    macs = resnet_spec(name).forward_flops() / 2 / 1e9
    assert macs == pytest.approx(TORCHVISION_GMACS[name], abs=0.01)


def test_training_flops_are_three_forward_passes():
    spec = resnet_spec("resnet50", "imagenet", 64, 10)
    assert spec.train_flops() == 3 * spec.forward_flops()


def test_v15_puts_bottleneck_stride_on_the_3x3_convolution():
    first_block_of_stage2 = list(resnet_spec("resnet50").stages())[1][0]
    strides = [conv.stride for conv in first_block_of_stage2.convs]
    kernels = [conv.kernel for conv in first_block_of_stage2.convs]
    assert strides == [1, 2, 1]
    assert kernels == [1, 3, 1]
    assert first_block_of_stage2.shortcut.stride == 2


def test_cifar_stem_is_a_3x3_convolution_without_pooling():
    spec = resnet_spec("resnet18", "cifar", 32, 10)
    assert (spec.stem_conv.kernel, spec.stem_conv.stride, spec.stem_maxpool) == (3, 1, False)
    # 7x7x3x64 stem weights replaced by 3x3x3x64
    assert (
        resnet_spec("resnet18", classes=10).trainable_params() - spec.trainable_params()
        == (49 - 9) * 3 * 64
    )


def test_flops_scale_with_image_area():
    small = resnet_spec("resnet18", "cifar", 32, 10).forward_flops()
    large = resnet_spec("resnet18", "cifar", 64, 10).forward_flops()
    fc = 2 * 512 * 10
    assert (large - fc) == pytest.approx(4 * (small - fc), rel=1e-9)


def test_unknown_model_names_the_allowed_ones():
    with pytest.raises(ValueError, match="resnet18"):
        resnet_spec("resnet19")


def test_parity_specs_cover_every_depth_and_stem():
    keys = parity_specs()
    assert "resnet101-cifar32-c10" in keys and "resnet18-imagenet224-c1000" in keys
    assert all(spec.name in DEPTHS for spec in keys.values())
