//! Bounds conditions as data, and what the bounds analysis decided for each access.
//!
//! The macro's bounds analysis (`sycl-macros/src/bounds.rs`) proves accesses in range under
//! conditions over the launch: the work-group size (a constant of each built program), the
//! global and group ranges, scalar parameters and slice lengths. A condition is a [`Bound`]
//! tree in saturating `u64` arithmetic; [`Bound::eval`] is its one interpreter (the host
//! evaluates run-time guards with it, the runtime folds work-group-size conditions with it),
//! and the C preludes' `sycl_b*` functions are its one C spelling.

/// A saturating `u64` operation of a bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoundFn {
    /// `a + b`, saturating at `u64::MAX` (which reads as "may have wrapped").
    Add,
    /// `a * b`, saturating.
    Mul,
    /// `min(a, b)`.
    Min,
    /// `max(a, b)`.
    Max,
    /// `a - b`, 0 instead of wrapping.
    Sub,
    /// `a / b`; `a` when `b` is 0.
    Div,
}

impl BoundFn {
    /// Every function, in wire-code order.
    pub const ALL: [BoundFn; 6] = [
        BoundFn::Add,
        BoundFn::Mul,
        BoundFn::Min,
        BoundFn::Max,
        BoundFn::Sub,
        BoundFn::Div,
    ];

    /// Applies it.
    pub fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            BoundFn::Add => a.saturating_add(b),
            BoundFn::Mul => a.saturating_mul(b),
            BoundFn::Min => a.min(b),
            BoundFn::Max => a.max(b),
            BoundFn::Sub => a.saturating_sub(b),
            BoundFn::Div => a.checked_div(b).unwrap_or(a),
        }
    }
}

/// A comparison in a bounds condition (1 when it holds, else 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum BoundCmp {
    Lt,
    Le,
    Ge,
    Gt,
}

impl BoundCmp {
    /// Every comparison, in wire-code order.
    pub const ALL: [BoundCmp; 4] = [BoundCmp::Lt, BoundCmp::Le, BoundCmp::Ge, BoundCmp::Gt];

    /// Applies it.
    pub fn apply(self, a: u64, b: u64) -> bool {
        match self {
            BoundCmp::Lt => a < b,
            BoundCmp::Le => a <= b,
            BoundCmp::Ge => a >= b,
            BoundCmp::Gt => a > b,
        }
    }
}

/// A bounds value or condition, in `u64` (a condition is 0 or 1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Bound {
    /// A number.
    Num(u64),
    /// The work-group size in a SYCL dimension: a constant of each built program.
    LocalRange(u8),
    /// The number of work-groups in a SYCL dimension (run time, the same in a launch).
    GroupRange(u8),
    /// The global range in a SYCL dimension (run time, the same in a launch).
    GlobalRange(u8),
    /// An unsigned scalar parameter's value (run time, the same in a launch).
    Param(usize),
    /// A slice parameter's length in elements (run time, the same in a launch).
    Len(usize),
    /// A const generic parameter's value: only in a const-generic kernel's template, whose
    /// instances replace it with the number ([`instantiate`](crate::instantiate())).
    Const(usize),
    /// A saturating operation.
    Fn(BoundFn, Box<Bound>, Box<Bound>),
    /// `wrap_lo(hi, lo, max)`: 0 when `hi >= max` (the value it bounds may have wrapped),
    /// else `lo`.
    WrapLo(Box<Bound>, Box<Bound>, Box<Bound>),
    /// A comparison.
    Cmp(BoundCmp, Box<Bound>, Box<Bound>),
    /// `c ? a : b` (`c` nonzero).
    Cond(Box<Bound>, Box<Bound>, Box<Bound>),
}

impl Bound {
    /// `f(a, b)`, folded when both are numbers.
    pub fn op(f: BoundFn, a: Bound, b: Bound) -> Bound {
        match (&a, &b) {
            (Bound::Num(x), Bound::Num(y)) => Bound::Num(f.apply(*x, *y)),
            _ => Bound::Fn(f, Box::new(a), Box::new(b)),
        }
    }

    /// `a cmp b`.
    pub fn cmp(op: BoundCmp, a: Bound, b: Bound) -> Bound {
        Bound::Cmp(op, Box::new(a), Box::new(b))
    }

    /// The value, with the leaves the launch knows (`leaf` is asked for every leaf but
    /// [`Bound::Num`]); `None` when a leaf is unknown.
    pub fn eval(&self, leaf: &dyn Fn(&Bound) -> Option<u64>) -> Option<u64> {
        Some(match self {
            Bound::Num(v) => *v,
            Bound::LocalRange(_)
            | Bound::GroupRange(_)
            | Bound::GlobalRange(_)
            | Bound::Param(_)
            | Bound::Len(_)
            | Bound::Const(_) => leaf(self)?,
            Bound::Fn(f, a, b) => f.apply(a.eval(leaf)?, b.eval(leaf)?),
            Bound::WrapLo(hi, lo, max) => {
                let (hi, lo, max) = (hi.eval(leaf)?, lo.eval(leaf)?, max.eval(leaf)?);
                if hi >= max {
                    0
                } else {
                    lo
                }
            }
            Bound::Cmp(op, a, b) => op.apply(a.eval(leaf)?, b.eval(leaf)?) as u64,
            Bound::Cond(c, a, b) => match c.eval(leaf)? {
                0 => b.eval(leaf)?,
                _ => a.eval(leaf)?,
            },
        })
    }

    /// Whether its value is known when a program is built for a work-group size: its only
    /// leaves are numbers, local ranges and (in a template) const parameters.
    pub fn is_build_time(&self) -> bool {
        let mut build_time = true;
        self.visit(&mut |b| {
            build_time &= !matches!(
                b,
                Bound::GroupRange(_) | Bound::GlobalRange(_) | Bound::Param(_) | Bound::Len(_)
            )
        });
        build_time
    }

    /// Calls `f` on this node and every node below it.
    pub fn visit(&self, f: &mut dyn FnMut(&Bound)) {
        f(self);
        match self {
            Bound::Fn(_, a, b) | Bound::Cmp(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Bound::WrapLo(a, b, c) | Bound::Cond(a, b, c) => {
                a.visit(f);
                b.visit(f);
                c.visit(f);
            }
            _ => {}
        }
    }

    /// The number of levels (a leaf: 1).
    pub fn depth(&self) -> usize {
        1 + match self {
            Bound::Fn(_, a, b) | Bound::Cmp(_, a, b) => a.depth().max(b.depth()),
            Bound::WrapLo(a, b, c) | Bound::Cond(a, b, c) => {
                a.depth().max(b.depth()).max(c.depth())
            }
            _ => 0,
        }
    }

    /// The number of nodes.
    pub fn size(&self) -> usize {
        let mut n = 0;
        self.visit(&mut |_| n += 1);
        n
    }
}

/// What the bounds analysis decided for one access (or one code-form fact).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Check {
    /// Not proved: checked at run time (an out-of-range index fails the work-item).
    Checked,
    /// Holds for every launch (the user's `unsafe` `get_unchecked`, or a proof).
    Proved,
    /// Holds when this condition, over the work-group size only, is true for the size the
    /// program is built for ([`Bound::is_build_time`]).
    When(Bound),
    /// Holds when this run-time condition is true: the same in every work-item of a launch,
    /// so the host evaluates it once per launch and picks the form without the check.
    Guard(Bound),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(v: u64) -> Bound {
        Bound::Num(v)
    }

    /// A launch: global range [64, 32], 8 groups of local size 8 along dimension 0,
    /// parameter 0 the scalar `p`, parameter 1 a slice of `len` elements.
    fn eval_with(g: &Bound, p: u64, len: u64) -> Option<u64> {
        g.eval(&|leaf| match *leaf {
            Bound::GlobalRange(0) => Some(64),
            Bound::GlobalRange(1) => Some(32),
            Bound::LocalRange(0) => Some(8),
            Bound::GroupRange(0) => Some(8),
            Bound::Param(0) => Some(p),
            Bound::Len(1) => Some(len),
            _ => None,
        })
    }

    #[test]
    fn range_against_a_length() {
        let g = Bound::cmp(BoundCmp::Le, Bound::GlobalRange(0), Bound::Len(1));
        assert_eq!(eval_with(&g, 0, 64), Some(1));
        assert_eq!(eval_with(&g, 0, 63), Some(0));
        assert!(!g.is_build_time());
    }

    #[test]
    fn rows_of_a_tiled_kernel() {
        // (group_range(0) - 1) * local_range(0) + local_range(0) - 1 < len(p1): 63 < len
        let last = Bound::op(
            BoundFn::Add,
            Bound::op(
                BoundFn::Mul,
                Bound::op(BoundFn::Sub, Bound::GroupRange(0), n(1)),
                Bound::LocalRange(0),
            ),
            Bound::op(BoundFn::Sub, Bound::LocalRange(0), n(1)),
        );
        let g = Bound::cmp(BoundCmp::Lt, last, Bound::Len(1));
        assert_eq!(eval_with(&g, 0, 64), Some(1));
        assert_eq!(eval_with(&g, 0, 63), Some(0));
    }

    #[test]
    fn saturation_selects_and_failed_divisions() {
        // u64::MAX * 2 saturates at the maximum, which no length exceeds.
        let g = Bound::cmp(
            BoundCmp::Lt,
            Bound::Fn(BoundFn::Mul, Box::new(n(u64::MAX)), Box::new(n(2))),
            Bound::Len(1),
        );
        assert_eq!(eval_with(&g, 0, u64::MAX), Some(0));
        // (p >= 4 ? p - 4 : MAX) < len(p1)
        let g = Bound::cmp(
            BoundCmp::Lt,
            Bound::Cond(
                Box::new(Bound::cmp(BoundCmp::Ge, Bound::Param(0), n(4))),
                Box::new(Bound::op(BoundFn::Sub, Bound::Param(0), n(4))),
                Box::new(n(u64::MAX)),
            ),
            Bound::Len(1),
        );
        assert_eq!(eval_with(&g, 10, 7), Some(1));
        assert_eq!(eval_with(&g, 3, 7), Some(0));
        // A division by 0 gives the dividend; wrap_lo gives 0 where hi reached the maximum.
        assert_eq!(BoundFn::Div.apply(7, 0), 7);
        assert_eq!(Bound::op(BoundFn::Div, n(7), n(0)), n(7));
        let w = Bound::WrapLo(Box::new(n(5)), Box::new(n(1)), Box::new(n(5)));
        assert_eq!(eval_with(&w, 0, 0), Some(0));
        let w = Bound::WrapLo(Box::new(n(4)), Box::new(n(1)), Box::new(n(5)));
        assert_eq!(eval_with(&w, 0, 0), Some(1));
    }

    #[test]
    fn a_value_the_launch_lacks_is_no_value() {
        let g = Bound::cmp(BoundCmp::Le, Bound::GlobalRange(2), Bound::Len(1));
        assert_eq!(eval_with(&g, 0, 64), None);
    }
}
