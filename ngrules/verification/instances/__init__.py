"""Instances of a rule's pattern: random graphs the rule should match, for verification.

A builder walks the pattern from its roots down, choosing the axes every node must have so that
the op table's inference succeeds: elementwise operands get their parent's axes, reductions and
`Dot` add fresh axes to reduce, `Broadcast` operands take a subset of its axes, and so on.
Variables become placeholders (one node per name), typed variables random nodes of their kind,
literals constants (bare or broadcast), optional wrappers are drawn present or absent and
commutative operands in either order.

Before drawing, the pattern's positions are grouped into classes that must have the same axes
(`constraints`: a named node wherever used, elementwise operands and results, `u.axes == v.axes`
guards); the first axes chosen in a class hold for all of it, so a named node built at its first
use already fits its later uses. Guards are honoured by construction when they fix a rank, the
dtype, axes (`m.axes == x.axes[:1]`) or a constant's value (`value(n) * size(m) == size(x)`),
computed from what is built or decided so far; otherwise by discarding instances the rule does
not fire on. Shapes the ops tie together are solved rather than drawn and discarded: a
convolution's or pooling's geometry from its known input, shared filters and fixed attributes
(`windows`), a concat's position and parts from the parts built, attributes a guard fixes
(`c.position == 0`), ranks a convolution fixes, and declared ops through their bodies
(`declared`). Every choice is a hypothesis draw, so a failing instance shrinks to a small one.
"""

from ngrules.verification.instances.builder import Builder
from ngrules.verification.instances.choices import Reject
from ngrules.verification.instances.classes import constraints
from ngrules.verification.instances.domains import (
    argument_domain,
    as_float64,
    converted_feeds,
    domain_values,
    feeds_for,
    placeholder_domains,
)
from ngrules.verification.instances.hints import guard_hints
from ngrules.verification.instances.sampling import (
    Instance,
    Rejected,
    attempts,
    earlier_rules,
    instances,
)

__all__ = [
    "Builder",
    "Instance",
    "Reject",
    "Rejected",
    "argument_domain",
    "as_float64",
    "converted_feeds",
    "attempts",
    "constraints",
    "domain_values",
    "earlier_rules",
    "feeds_for",
    "guard_hints",
    "instances",
    "placeholder_domains",
]
