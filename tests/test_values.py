"""Known constant values (`ir.values`): the one value a constant holds everywhere."""

import numpy as np
import pytest

import ngrules as ng
from ngrules.ir.values import scalar_value

N = ng.make_axis(9, "N")


@pytest.mark.parametrize("array, expected", [
    (np.full(9, 2.5), 2.5),
    (np.array([0.0, -0.0, 0.0, 0.0, -0.0, 0.0, 0.0, 0.0, -0.0]), 0.0),  # equal, as numpy says
    (np.array([1.0, 1, 1, 1, 1, 1, 1, 1, 2]), None),  # the last differs
    (np.array([1.0, 1, 1, 1, 2, 1, 1, 1, 1]), None),  # the middle differs
    (np.array([1.0, 2, 1, 1, 1, 1, 1, 1, 1]), None),  # only an element between differs
    (np.full(9, np.nan), None),  # nan equals nothing: no one value
])
def test_the_one_value_of_a_constant(array, expected):
    assert scalar_value(ng.constant(array, [N])) == expected
