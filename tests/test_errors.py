"""Every error a user can reach from Python, one test each: the exception
type follows PyTorch, and the message names the function, the argument and
what was expected (shapes, dtypes, devices shown)."""
import numpy as np
import pytest

import ampc

# ----------------------------------------------------------------------------
# creation


def test_zeros_negative_size():
    with pytest.raises(RuntimeError, match=r"zeros\(\).*size.*\[2, -1\]"):
        ampc.zeros(2, -1)


def test_zeros_float_size():
    with pytest.raises(TypeError,
                       match=r"zeros\(\): argument 'size'.*float.*pos 1"):
        ampc.zeros(2, 1.5)


def test_ones_size_not_a_tuple():
    with pytest.raises(TypeError, match=r"ones\(\): argument 'size'.*str"):
        ampc.ones("3")


def test_empty_bad_dtype():
    with pytest.raises(TypeError,
                       match=r"empty\(\): argument 'dtype' must be an "
                             r"ampc.dtype.*str 'float32'"):
        ampc.empty(2, dtype="float32")


def test_numpy_dtype_is_not_a_dtype():
    with pytest.raises(TypeError, match=r"zeros\(\): argument 'dtype'"):
        ampc.zeros(2, dtype=np.float32)


def test_too_many_dims():
    with pytest.raises(ValueError, match="at most 16 dimensions"):
        ampc.zeros(*([1] * 17))


def test_bad_device_string():
    with pytest.raises(RuntimeError, match="device string: gpu"):
        ampc.ones(2, device="gpu")


def test_bad_device_type():
    with pytest.raises(TypeError, match=r"ones\(\): argument 'device'.*float"):
        ampc.ones(2, device=1.5)


def test_device_bad_index():
    with pytest.raises(RuntimeError, match="invalid device string"):
        ampc.device("cuda:x")


@pytest.mark.skipif(ampc.cuda.is_available(), reason="needs no GPU")
def test_cuda_device_without_gpu():
    with pytest.raises(RuntimeError, match="cuda.*not available"):
        ampc.zeros(2, device="cuda")


def test_tensor_of_str():
    with pytest.raises(TypeError, match=r"tensor\(\): could not infer dtype "
                                        r"of str"):
        ampc.tensor("abc")


def test_tensor_ragged():
    with pytest.raises(ValueError, match=r"tensor\(\): expected a sequence "
                                         r"of equal-length"):
        ampc.tensor([[1, 2], [3]])


def test_tensor_complex():
    with pytest.raises(TypeError, match=r"tensor\(\).*complex128"):
        ampc.tensor(np.zeros(2, dtype=np.complex128))


def test_tensor_object_dtype():
    with pytest.raises(TypeError, match=r"tensor\(\): could not infer"):
        ampc.tensor([None, 1])


def test_tensor_int_too_large():
    with pytest.raises(RuntimeError, match=r"tensor\(\).*int64"):
        ampc.tensor([2**70])


def test_tensor_requires_grad_int():
    with pytest.raises(RuntimeError, match=r"tensor\(\): only Tensors of "
                                           r"floating point dtype"):
        ampc.tensor([1, 2], requires_grad=True)


def test_from_numpy_not_array():
    with pytest.raises(TypeError, match=r"from_numpy\(\): argument 'a' must "
                                        r"be a numpy.ndarray.*list"):
        ampc.from_numpy([1.0])


def test_from_numpy_float64():
    with pytest.raises(TypeError, match=r"from_numpy\(\).*float64.*float32, "
                                        r"float16, int64 and bool"):
        ampc.from_numpy(np.zeros(3))


def test_from_numpy_negative_strides():
    with pytest.raises(ValueError, match=r"from_numpy\(\).*negative"):
        ampc.from_numpy(np.zeros(3, dtype=np.float32)[::-1])


def test_full_bad_value():
    with pytest.raises(TypeError, match=r"full\(\): argument 'fill_value' "
                                        r"must be a number"):
        ampc.full((2,), "x")


def test_arange_zero_step():
    with pytest.raises(RuntimeError, match=r"arange\(\): step must be "
                                           r"nonzero"):
        ampc.arange(0, 10, 0)


def test_arange_wrong_sign():
    with pytest.raises(RuntimeError, match=r"arange\(\): upper bound and "
                                           r"lower bound inconsistent"):
        ampc.arange(10, 0, 1)


def test_arange_not_finite():
    with pytest.raises(RuntimeError, match=r"arange\(\).*'end' must be "
                                           r"finite"):
        ampc.arange(0, float("inf"))


def test_randint_empty_range():
    with pytest.raises(RuntimeError, match=r"randint\(\).*from=5 >= to=5"):
        ampc.randint(5, 5, (2,))


def test_randint_no_size():
    with pytest.raises(TypeError, match=r"randint\(\): argument 'size'"):
        ampc.randint(0, 5)


def test_rand_int_dtype():
    with pytest.raises(TypeError, match=r"randn\(\): expected a floating "
                                        r"point dtype"):
        ampc.randn(3, dtype=ampc.int64)


def test_manual_seed_not_int():
    with pytest.raises(TypeError, match=r"manual_seed\(\): argument 'seed' "
                                        r"must be an int.*float"):
        ampc.manual_seed(1.5)


def test_uniform_bad_range():
    with pytest.raises(RuntimeError, match=r"uniform_\(\): expects a <= b"):
        ampc.empty(3).uniform_(2, 1)


def test_normal_negative_std():
    with pytest.raises(RuntimeError, match=r"normal_\(\): expects std >= "
                                           r"0.0"):
        ampc.empty(3).normal_(0, -1)


def test_bernoulli_bad_p():
    with pytest.raises(RuntimeError, match=r"bernoulli_\(\).*p=1.5"):
        ampc.empty(3).bernoulli_(1.5)


# ----------------------------------------------------------------------------
# shapes and views


def test_broadcast_mismatch_shows_shapes():
    with pytest.raises(RuntimeError, match=r"add\(\).*size of tensor a \(3\) "
                                           r"must match.*\[2, 3\] and \[4\]"):
        ampc.ones(2, 3) + ampc.ones(4)


def test_inplace_output_shape():
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't "
                                           r"match the broadcast shape "
                                           r"\[2, 3\]"):
        ampc.ones(3).add_(ampc.ones(2, 3))


def test_inplace_int_result_type():
    with pytest.raises(RuntimeError, match="can't be cast to the desired "
                                           "output type"):
        ampc.ones(3, dtype=ampc.int64).mul_(1.5)


def test_view_bad_numel():
    with pytest.raises(RuntimeError, match=r"view\(\): shape .* is invalid "
                                           r"for input of size 6"):
        ampc.ones(2, 3).view(-1, 4)


def test_view_two_inferred():
    with pytest.raises(RuntimeError, match="only one dimension can be "
                                           "inferred"):
        ampc.ones(2, 3).view(-1, -1)


def test_view_incompatible_strides():
    with pytest.raises(RuntimeError,
                       match=r"view size is not compatible with input "
                             r"tensor's size and stride.*Use "
                             r"\.reshape\(\.\.\.\) instead"):
        ampc.ones(2, 3).t().view(6)


def test_view_bad_shape_type():
    with pytest.raises(TypeError, match=r"view\(\): argument 'shape'.*str"):
        ampc.ones(4).view(2, "2")


def test_reshape_bad_numel():
    with pytest.raises(RuntimeError, match=r"reshape\(\).*invalid for input "
                                           r"of size 6"):
        ampc.ones(2, 3).reshape(4, 2)


def test_transpose_dim_out_of_range():
    with pytest.raises(IndexError, match=r"transpose\(\): Dimension out of "
                                         r"range \(expected to be in range "
                                         r"of \[-2, 1\], but got 3\)"):
        ampc.ones(2, 3).transpose(0, 3)


def test_t_on_3d():
    with pytest.raises(RuntimeError, match=r"t\(\) expects a tensor with <= "
                                           r"2 dimensions, but self is 3D"):
        ampc.ones(1, 2, 3).t()


def test_permute_wrong_length():
    with pytest.raises(RuntimeError, match=r"permute\(\): number of dims "
                                           r"don't match.*2 dimensions but 1"):
        ampc.ones(2, 3).permute(0)


def test_permute_duplicate():
    with pytest.raises(RuntimeError, match=r"permute\(\): duplicate dims"):
        ampc.ones(2, 3).permute(1, 1)


def test_expand_incompatible():
    with pytest.raises(RuntimeError, match=r"expanded size of the tensor "
                                           r"\(3\) must match the existing "
                                           r"size \(2\).*\[3, 3\].*\[2, 3\]"):
        ampc.ones(2, 3).expand(3, 3)


def test_flatten_start_after_end():
    with pytest.raises(RuntimeError, match=r"flatten\(\): start_dim cannot "
                                           r"come after end_dim"):
        ampc.ones(2, 3, 4).flatten(2, 1)


def test_unsqueeze_out_of_range():
    with pytest.raises(IndexError, match=r"unsqueeze\(\): Dimension out of "
                                         r"range"):
        ampc.ones(2).unsqueeze(3)


def test_squeeze_out_of_range():
    with pytest.raises(IndexError, match=r"squeeze\(\): Dimension out of "
                                         r"range"):
        ampc.ones(2).squeeze(1)


def test_size_dim_out_of_range():
    with pytest.raises(IndexError, match=r"size\(\): Dimension out of range"):
        ampc.ones(2).size(3)


# ----------------------------------------------------------------------------
# indexing


def test_index_out_of_bounds():
    with pytest.raises(IndexError, match="index 5 is out of bounds for "
                                         "dimension 0 with size 2"):
        ampc.ones(2, 3)[5]


def test_index_too_many():
    with pytest.raises(IndexError):
        ampc.ones(2)[0, 0]


def test_index_negative_step():
    with pytest.raises(ValueError, match="step must be greater than zero"):
        ampc.ones(3)[::-1]


def test_index_float():
    with pytest.raises(TypeError, match=r"__getitem__\(\).*float"):
        ampc.ones(3)[1.5]


def test_index_list_out_of_range():
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for "
                                         r"dimension 0 with size 3"):
        ampc.ones(3)[[0, 3]]


def test_index_bool_mask_of_the_wrong_shape():
    with pytest.raises(IndexError, match=r"shape of the mask \[2\] at index "
                                         r"0 does not match"):
        ampc.ones(3)[ampc.tensor([True, False])]


def test_index_with_a_string():
    with pytest.raises(TypeError, match=r"ints, slices, None, Ellipsis, and "
                                        r"int64 or bool tensors.*not str"):
        ampc.ones(3)["a"]


def test_setitem_bad_value():
    with pytest.raises(TypeError, match=r"__setitem__\(\): the value must "
                                        r"be a Tensor or a number"):
        ampc.ones(3)[0] = "x"


def test_setitem_shape_mismatch():
    with pytest.raises(RuntimeError):
        ampc.ones(3)[0:2] = ampc.ones(3)


# ----------------------------------------------------------------------------
# ops


def test_op_with_str():
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for "
                                        r"\+: 'Tensor' and 'str'"):
        ampc.ones(3) + "a"


def test_named_op_with_str():
    with pytest.raises(TypeError, match=r"mul\(\): argument 'other' must be "
                                        r"a Tensor or a number.*str"):
        ampc.ones(3).mul("a")


def test_method_extra_argument():
    with pytest.raises(TypeError, match=r"Tensor.exp\(\) takes 1 positional "
                                        r"argument"):
        ampc.ones(2).exp(1)


def test_bool_subtraction():
    with pytest.raises(RuntimeError, match="Subtraction.*two bool tensors"):
        ampc.ones(2, dtype=ampc.bool) - ampc.ones(2, dtype=ampc.bool)


def test_int_negative_power():
    with pytest.raises(RuntimeError, match="Integers to negative integer "
                                           "powers are not allowed"):
        ampc.ones(2, dtype=ampc.int64) ** -1


def test_clamp_without_bounds():
    with pytest.raises(RuntimeError, match=r"clamp\(\): at least one of "
                                           r"'min' or 'max'"):
        ampc.ones(2).clamp()


def test_clamp_bad_bound():
    with pytest.raises(TypeError, match=r"clamp\(\): argument 'min' must be "
                                        r"a number or None.*str"):
        ampc.ones(2).clamp(min="a")


def test_sum_dim_out_of_range():
    with pytest.raises(IndexError, match=r"sum\(\): Dimension out of range"):
        ampc.ones(2, 3).sum(5)


def test_sum_dim_repeated():
    with pytest.raises(RuntimeError, match=r"sum\(\): dim 0 appears "
                                           r"multiple times"):
        ampc.ones(2, 3).sum((0, 0))


def test_sum_dim_float():
    with pytest.raises(TypeError, match=r"sum\(\): argument 'dim'.*float"):
        ampc.ones(2, 3).sum(1.5)


def test_mean_int():
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer "
                                           r"output dtype.*int64"):
        ampc.arange(3).mean()


def test_max_empty():
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim "
                                           r"to be specified for "
                                           r"input.numel\(\) == 0"):
        ampc.empty(0).max()


def test_argmax_empty():
    with pytest.raises((IndexError, RuntimeError), match=r"argmax\(\)"):
        ampc.empty(0).argmax()


def test_argmax_dim_out_of_range():
    with pytest.raises(IndexError, match=r"argmax\(\): Dimension out of "
                                         r"range"):
        ampc.ones(2).argmax(2)


def test_cat_empty():
    with pytest.raises(ValueError, match=r"cat\(\): expected a non-empty "
                                         r"list of Tensors"):
        ampc.cat([])


def test_cat_not_a_list():
    with pytest.raises(TypeError, match=r"cat\(\): argument 'tensors' must "
                                        r"be a tuple or list of Tensors"):
        ampc.cat(ampc.ones(2))


def test_cat_element_not_tensor():
    with pytest.raises(TypeError, match=r"cat\(\): expected Tensor as "
                                        r"element 1 in argument 0, but got "
                                        r"int"):
        ampc.cat([ampc.ones(2), 1])


def test_cat_size_mismatch():
    with pytest.raises(RuntimeError, match=r"cat\(\): Sizes of tensors must "
                                           r"match except in dimension 0.*"
                                           r"\[2, 3\].*\[3, 2\]"):
        ampc.cat([ampc.ones(2, 3), ampc.ones(3, 2)])


def test_cat_dim_out_of_range():
    with pytest.raises(IndexError, match=r"cat\(\): Dimension out of range"):
        ampc.cat([ampc.ones(2), ampc.ones(2)], 3)


def test_stack_size_mismatch():
    with pytest.raises(RuntimeError, match=r"stack\(\): stack expects each "
                                           r"tensor to be equal size, but got "
                                           r"\[2, 3\] at entry 0 and \[3, 2\] "
                                           r"at entry 1"):
        ampc.stack([ampc.ones(2, 3), ampc.ones(3, 2)])


def test_stack_dim_out_of_range():
    with pytest.raises(IndexError, match=r"stack\(\): Dimension out of "
                                         r"range"):
        ampc.stack([ampc.ones(2)], 3)


def test_copy_from_non_tensor():
    with pytest.raises(TypeError, match=r"copy_\(\): argument 'src' must be "
                                        r"a Tensor.*list"):
        ampc.ones(2).copy_([1, 2])


def test_copy_shape_mismatch():
    with pytest.raises(RuntimeError, match=r"copy_\(\)"):
        ampc.ones(2).copy_(ampc.ones(3))


def test_fill_bad_value():
    with pytest.raises(TypeError, match=r"fill_\(\): argument 'value' must "
                                        r"be a number"):
        ampc.ones(2).fill_("a")


def test_functional_input_not_tensor():
    with pytest.raises(TypeError, match=r"abs\(\): argument 'input' "
                                        r"\(position 1\) must be Tensor, not "
                                        r"list"):
        ampc.abs([1, 2])


def test_to_bad_argument():
    with pytest.raises(TypeError, match=r"to\(\): expected a dtype, a device "
                                        r"or a Tensor.*float"):
        ampc.ones(2).to(1.5)


def test_to_unknown_keyword():
    with pytest.raises(TypeError, match=r"to\(\): unexpected keyword "
                                        r"argument 'foo'"):
        ampc.ones(2).to(foo=1)


def test_double_not_supported():
    with pytest.raises(TypeError, match=r"double\(\): ampc has no float64"):
        ampc.ones(2).double()


# ----------------------------------------------------------------------------
# conversions


def test_item_many_elements():
    with pytest.raises(RuntimeError, match="a Tensor with 6 elements cannot "
                                           "be converted to Scalar"):
        ampc.ones(2, 3).item()


def test_bool_ambiguous():
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more "
                                           "than one value is ambiguous"):
        bool(ampc.ones(2))


def test_float_many_elements():
    with pytest.raises(ValueError, match="only one element tensors can be "
                                         "converted to Python scalars"):
        float(ampc.ones(2))


def test_index_of_float_tensor():
    with pytest.raises(TypeError, match="only integer tensors of a single "
                                        "element can be converted to an "
                                        "index"):
        [1, 2][ampc.tensor(0.0)]


def test_len_of_0d():
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(ampc.tensor(1.0))


def test_iter_of_0d():
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(ampc.tensor(1.0))


def test_format_spec_on_vector():
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{ampc.ones(2):.2f}"


def test_numpy_requires_grad():
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor "
                                           r"that requires grad"):
        ampc.ones(2, requires_grad=True).numpy()


def test_numpy_bfloat16():
    with pytest.raises(TypeError, match="Got unsupported ScalarType "
                                        "BFloat16"):
        ampc.ones(2, dtype=ampc.bfloat16).numpy()


# ----------------------------------------------------------------------------
# autograd


def test_requires_grad_int():
    with pytest.raises(RuntimeError, match="only Tensors of floating point "
                                           "dtype can require gradients"):
        ampc.ones(2, dtype=ampc.int64).requires_grad = True


def test_requires_grad_not_bool():
    with pytest.raises(TypeError, match=r"requires_grad_\(\): argument "
                                        r"'requires_grad' must be a bool"):
        ampc.ones(2).requires_grad_(1)


def test_requires_grad_false_on_non_leaf():
    y = ampc.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="you can only change "
                                           "requires_grad flags of leaf "
                                           "variables"):
        y.requires_grad_(False)


def test_grad_wrong_shape():
    t = ampc.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"assigned grad has data of a "
                                           r"different size: got \[3\], "
                                           r"expected \[2, 3\]"):
        t.grad = ampc.ones(3)


def test_grad_wrong_dtype():
    t = ampc.ones(2)
    with pytest.raises(RuntimeError, match="assigned grad has data of type "
                                           "ampc.float16"):
        t.grad = ampc.ones(2, dtype=ampc.float16)


def test_grad_not_tensor():
    with pytest.raises(TypeError, match="assigned grad expected to be a "
                                        "Tensor or None but got int"):
        ampc.ones(2).grad = 3


def test_backward_nonscalar():
    with pytest.raises(RuntimeError, match="grad can be implicitly created "
                                           "only for scalar outputs"):
        (ampc.ones(2, requires_grad=True) * 2).backward()


def test_backward_twice():
    x = ampc.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the "
                                           "graph a second time"):
        y.backward()


def test_backward_no_grad():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not "
                                           "require grad and does not have a "
                                           "grad_fn"):
        ampc.ones(1).sum().backward()


def test_backward_gradient_not_tensor():
    with pytest.raises(TypeError, match=r"backward\(\): gradient 0 must be a "
                                        r"Tensor"):
        (ampc.ones(2, requires_grad=True) * 2).backward([1.0, 1.0])


def test_backward_gradient_shape():
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: "
                                           r"grad_output\[0\] has a shape of "
                                           r"\[3\] and output\[0\] has a "
                                           r"shape of \[2\]"):
        (ampc.ones(2, requires_grad=True) * 2).backward(ampc.ones(3))


def test_leaf_inplace():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires "
                                           "grad is being used in an "
                                           "in-place operation."):
        ampc.ones(2, requires_grad=True).mul_(2)


def test_view_of_leaf_inplace():
    x = ampc.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that "
                                           "requires grad"):
        x[0].mul_(2)


def test_saved_tensor_modified():
    x = ampc.ones(2, requires_grad=True)
    h = x * 1
    y = h * h
    h.add_(1)
    with pytest.raises(RuntimeError, match="one of the variables needed for "
                                           "gradient computation has been "
                                           "modified by an inplace "
                                           "operation: \\[ampc.FloatTensor "
                                           "\\[2\\]\\].*version 1; expected "
                                           "version 0"):
        y.sum().backward()


def test_retain_grad_without_grad():
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that "
                                           "has requires_grad=False"):
        ampc.ones(2).retain_grad()


def test_autograd_grad_unused():
    x = ampc.ones(2, requires_grad=True)
    w = ampc.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"inputs\[0\]\) appears to not "
                                           r"have been used"):
        ampc.autograd.grad((x * 2).sum(), [w])


def test_set_grad_enabled_not_bool():
    with pytest.raises(TypeError, match=r"set_grad_enabled\(\): argument "
                                        r"'mode' must be a bool"):
        ampc.set_grad_enabled(1)


def test_no_grad_decorating_non_callable():
    with pytest.raises(TypeError, match=r"no_grad\(\): can only decorate a "
                                        r"callable"):
        ampc.no_grad()(3)


# ----------------------------------------------------------------------------
# dispatch


def test_set_cpu_level_unknown():
    with pytest.raises(ValueError, match=r"_set_cpu_level\(\): expected "
                                         r"'ref', 'avx2' or 'avx512', got "
                                         r"'foo'"):
        ampc._C._set_cpu_level("foo")


def test_kernel_variant_unknown_slot():
    with pytest.raises(ValueError, match=r"kernel_variant\(\): unknown slot "
                                         r"'nope'"):
        ampc.backends.cpu.kernel_variant("nope")


def test_kernel_variant_not_str():
    with pytest.raises(TypeError, match=r"kernel_variant\(\): argument "
                                        r"'slot' must be a str"):
        ampc.backends.cpu.kernel_variant(1)


def test_memory_allocated_bad_device():
    with pytest.raises(RuntimeError, match="device string: tpu"):
        ampc.memory_allocated("tpu")
