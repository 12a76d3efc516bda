//! Writes `$OUT_DIR/random_kernels.rs` for the `proofs` test (tests/proofs/main.rs): random
//! kernels of the kernel language (spec/kernels.md), each twice, `kN` with `#[sycl::kernel]`
//! and `kN_unproved` with `#[sycl::kernel(__no_proofs)]` (every bounds proof off, a testing
//! switch of sycl-macros), with identical bodies. The test runs both forms with identical
//! inputs and compares what they write and whether they fail: a bounds proof that is wrong
//! shows up as a difference.
//!
//! `SYCL_RS_PROOF_SEED` (a number, decimal or `0x` hex) picks the kernels, `SYCL_RS_PROOF_KERNELS`
//! how many (default 40; a larger count keeps the first kernels and adds more, and finds more).
//! Every kernel has the same parameters `(x: &[u32], y: &[u32], out: &mut [u32],
//! acc: &mut [u32], res: &mut [u32], a: u32, b: u32, n: usize, m: usize, p: u32)`. Most
//! kernels are a few small *probes*, `if p == i { .. }`, one of which a launch runs (so that
//! one access out of bounds does not hide another: the launch's failure is one bit); the rest
//! are a handful of statements. Indices are built the way the proof rules of bounds.rs read
//! them (ids, ranges, lengths, scalars, `for` variables over literal, length and chunk
//! bounds, `+ - * / % & >> min max`, casts, `if` values), often at the edge of a bound.
//! Kernels write only in ways whose result does not depend on the order of work-items, so
//! that two correct runs write the same bytes:
//! - `out[i] = (i as u32) * 3 + 1`: every store to an element stores the same value;
//! - `atomic_fetch_add(acc, i, v)`: sums commute;
//! - `res[r] = v` / `res[r] += v` with one index form `r` per kernel that differs between all
//!   work-items of a launch (`global_id(0)`, `global_id(0) * global_range(1) + global_id(1)`,
//!   ..), so each element has one writer;
//! - work-group kernels: a local array zeroed by every work-item, then written either at one
//!   index per work-item of the group (`tile[local_id(0)] = ..`) or with values that depend on
//!   the index only, between barriers.
//!
//! Only `x` and `y` are read (besides `res[r] += v`, by its one writer).

use std::fmt::Write as _;

/// The default seed (any number; this one is just fixed).
const DEFAULT_SEED: u64 = 0x5eed_0b0d_2026_0001;
/// The default number of kernels.
const DEFAULT_KERNELS: usize = 40;

include!("proofs/rng.rs");

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum T {
    U32,
    Usize,
}

impl T {
    fn name(self) -> &'static str {
        match self {
            T::U32 => "u32",
            T::Usize => "usize",
        }
    }

    fn other(self) -> T {
        match self {
            T::U32 => T::Usize,
            T::Usize => T::U32,
        }
    }
}

struct Var {
    name: String,
    ty: T,
}

/// Generates one kernel body.
struct Gen<'r> {
    rng: &'r mut Rng,
    /// Dimensions the kernel's queries use (and its launches have).
    dims: u8,
    /// Whether local and group queries are allowed (nd-range launches).
    nd: bool,
    /// The local array's length, in work-group kernels.
    tile: Option<usize>,
    /// Whether the kernel may read `tile` now (after the barrier that ends its writes).
    tile_readable: bool,
    /// Visible locals, per block.
    scopes: Vec<Vec<Var>>,
    next_local: usize,
    /// Loop nesting.
    loops: usize,
    /// Statement nesting (ifs and loops).
    nesting: usize,
    /// The `usize` loop variables in scope (also a `u32` one widened), innermost last.
    loop_vars: Vec<String>,
    /// For each loop of `loop_vars`, the slice (or `tile`) whose length bounds it, if any:
    /// its body mostly indexes that one.
    loop_targets: Vec<Option<&'static str>>,
    /// A focused kernel: few statements and accesses, so that one access out of bounds is
    /// seldom hidden by another one failing the launch in both forms.
    focused: bool,
    /// `res`'s index: one form per kernel, different for every work-item of a launch.
    res_index: String,
    out: String,
    indent: usize,
}

const U32_LITS: &[u64] = &[
    0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 32, 63, 64, 100, 255, 256, 1000, 65535, 2147483647,
    2147483648, 4294967294, 4294967295,
];
const USIZE_LITS: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    5,
    7,
    8,
    15,
    16,
    31,
    32,
    63,
    64,
    100,
    255,
    256,
    1000,
    65535,
    2147483647,
    2147483648,
    4294967295,
    4294967296,
    9223372036854775807,
    9223372036854775808,
    18446744073709551614,
    18446744073709551615,
];
const SLICES_READ: &[&str] = &["x", "y"];
const SLICES_ALL: &[&str] = &["x", "y", "out", "acc", "res"];
/// What loops run over (and access): mostly the inputs.
const SLICES_LOOP: &[&str] = &["x", "x", "y", "y", "out"];

impl Gen<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next_local += 1;
        format!("{prefix}{}", self.next_local)
    }

    fn declare(&mut self, name: &str, ty: T) {
        self.scopes.last_mut().expect("a scope").push(Var {
            name: name.to_string(),
            ty,
        });
    }

    fn vars(&self, ty: T) -> Vec<String> {
        self.scopes
            .iter()
            .flatten()
            .filter(|v| v.ty == ty)
            .map(|v| v.name.clone())
            .collect()
    }

    fn dim(&mut self) -> u64 {
        self.rng.below(self.dims as u64)
    }

    fn small_lit(&mut self, t: T, lo: u64, hi: u64) -> String {
        let v = lo + self.rng.below(hi - lo + 1);
        format!("{v}{}", t.name())
    }

    fn lit(&mut self, t: T) -> String {
        if self.rng.chance(60) {
            return self.small_lit(t, 0, 20);
        }
        let v = match t {
            T::U32 => *self.rng.pick(U32_LITS),
            T::Usize => *self.rng.pick(USIZE_LITS),
        };
        format!("{v}{}", t.name())
    }

    /// A value of type `t` without operators (or one cast or load).
    fn leaf(&mut self, t: T, depth: u32) -> String {
        let vars = self.vars(t);
        match t {
            T::Usize => {
                let nd = if self.nd { 1 } else { 0 };
                let tile = if self.tile.is_some() { 1 } else { 0 };
                let w = [
                    5,                                   // global_id
                    1,                                   // global_range
                    3 * nd,                              // local_id
                    nd,                                  // local_range
                    2 * nd,                              // group_id
                    nd,                                  // group_range
                    2,                                   // slice length
                    tile,                                // tile.len()
                    2,                                   // n, m
                    2,                                   // literal
                    if vars.is_empty() { 0 } else { 6 }, // local
                    1,                                   // cast from u32
                ];
                match self.rng.weighted(&w) {
                    0 => format!("global_id({})", self.dim()),
                    1 => format!("global_range({})", self.dim()),
                    2 => format!("local_id({})", self.dim()),
                    3 => format!("local_range({})", self.dim()),
                    4 => format!("group_id({})", self.dim()),
                    5 => format!("group_range({})", self.dim()),
                    6 => format!("{}.len()", self.rng.pick(SLICES_ALL)),
                    7 => "tile.len()".to_string(),
                    8 => self.rng.pick(&["n", "m"]).to_string(),
                    9 => self.lit(t),
                    10 => self.rng.pick(&vars).clone(),
                    _ => {
                        let e = self.leaf(T::U32, depth);
                        format!("({e} as usize)")
                    }
                }
            }
            T::U32 => {
                let w = [
                    2,                                              // a, b
                    2,                                              // literal
                    if vars.is_empty() { 0 } else { 6 },            // local
                    3,                                              // cast from usize
                    if depth > 0 && !self.focused { 2 } else { 0 }, // load
                ];
                match self.rng.weighted(&w) {
                    0 => self.rng.pick(&["a", "b"]).to_string(),
                    1 => self.lit(t),
                    2 => self.rng.pick(&vars).clone(),
                    3 => {
                        let e = self.leaf(T::Usize, depth);
                        format!("({e} as u32)")
                    }
                    _ => self.load(depth - 1),
                }
            }
        }
    }

    /// `x[i]` or `y[i]` (or `tile[i]` where readable).
    fn load(&mut self, depth: u32) -> String {
        let preferred = match self.loop_targets.last() {
            Some(Some(t)) if *t == "x" || *t == "y" || (*t == "tile" && self.tile_readable) => {
                Some(*t)
            }
            _ => None,
        };
        let target = match preferred {
            Some(t) if self.rng.chance(70) => t,
            _ if self.tile_readable && self.rng.chance(30) => "tile",
            _ => self.rng.pick(SLICES_READ),
        };
        let i = self.index(depth, target);
        format!("{target}[{i}]")
    }

    /// A divisor: usually not zero (a division by zero fails the work-item too, which is
    /// fine, but too many failing launches test little).
    fn divisor(&mut self, t: T, depth: u32) -> String {
        match self.rng.below(13) {
            0..=4 => self.small_lit(t, 1, 17),
            5 | 6 => {
                let e = self.expr(t, depth);
                let l = self.small_lit(t, 1, 9);
                let one = format!("1{}", t.name());
                format!("({e} % {l} + {one})")
            }
            7 => {
                let e = self.expr(t, depth);
                format!("({e}).max(1{})", t.name())
            }
            8 => format!("({} | 1{})", self.expr(t, depth), t.name()),
            9 | 10 => match t {
                T::Usize => format!("{}.len()", self.rng.pick(SLICES_ALL)),
                T::U32 => format!("({}.len() as u32)", self.rng.pick(SLICES_ALL)),
            },
            11 => self.leaf(t, depth),
            _ => self.expr(t, depth),
        }
    }

    /// A shift amount (any: shifts mask it).
    fn shift(&mut self, t: T, depth: u32) -> String {
        if self.rng.chance(75) {
            let v = *self
                .rng
                .pick(&[0u64, 1, 2, 3, 4, 5, 8, 16, 31, 32, 33, 63, 64]);
            format!("{v}{}", t.name())
        } else {
            self.expr(t, depth)
        }
    }

    /// An expression of type `t`.
    fn expr(&mut self, t: T, depth: u32) -> String {
        if depth == 0 || self.rng.chance(30) {
            return self.leaf(t, depth);
        }
        let d = depth - 1;
        let w = [
            6, // +
            4, // -
            4, // *
            2, // /
            3, // %
            2, // &
            2, // >>
            3, // min
            2, // max
            2, // if value
            1, // | ^ <<
            2, // cast from the other type
        ];
        match self.rng.weighted(&w) {
            0 => format!("({} + {})", self.expr(t, d), self.expr(t, d)),
            1 => format!("({} - {})", self.expr(t, d), self.expr(t, d)),
            2 => format!("({} * {})", self.expr(t, d), self.expr(t, d)),
            3 => format!("({} / {})", self.expr(t, d), self.divisor(t, d)),
            4 => format!("({} % {})", self.expr(t, d), self.divisor(t, d)),
            5 => format!("({} & {})", self.expr(t, d), self.expr(t, d)),
            6 => format!("({} >> {})", self.expr(t, d), self.shift(t, d)),
            7 => format!("({}).min({})", self.expr(t, d), self.expr(t, d)),
            8 => format!("({}).max({})", self.expr(t, d), self.expr(t, d)),
            9 => {
                let c = self.cond(d);
                format!(
                    "(if {c} {{ {} }} else {{ {} }})",
                    self.expr(t, d),
                    self.expr(t, d)
                )
            }
            10 => match self.rng.below(3) {
                0 => format!("({} | {})", self.expr(t, d), self.expr(t, d)),
                1 => format!("({} ^ {})", self.expr(t, d), self.expr(t, d)),
                _ => format!("({} << {})", self.expr(t, d), self.shift(t, d)),
            },
            _ => {
                let e = self.expr(t.other(), d);
                format!("({e} as {})", t.name())
            }
        }
    }

    /// A condition.
    fn cond(&mut self, depth: u32) -> String {
        let t = if self.rng.chance(60) {
            T::Usize
        } else {
            T::U32
        };
        let op = *self.rng.pick(&["<", "<=", "==", "!=", ">", ">="]);
        let vars = self.vars(T::Usize);
        // Now and then a variable below something slice-long, the test that guards an index
        // (`if i < end { x[i] }`: the proofs take such conditions as facts).
        let c = if !vars.is_empty() && self.rng.chance(25) {
            let v = self.rng.pick(&vars).clone();
            let s = self.rng.pick(SLICES_ALL);
            let end = match self.rng.below(3) {
                0 => format!("{s}.len()"),
                1 => format!("({}).min({s}.len())", self.expr(T::Usize, depth)),
                _ => self.expr(T::Usize, depth),
            };
            let op = *self.rng.pick(&["<", "<", "<=", ">"]);
            if op == ">" {
                format!("({end} > {v})")
            } else {
                format!("({v} {op} {end})")
            }
        } else {
            format!("({} {op} {})", self.expr(t, depth), self.expr(t, depth))
        };
        if depth > 0 && self.rng.chance(15) {
            let op = *self.rng.pick(&["&&", "||"]);
            format!("({c} {op} {})", self.cond(depth - 1))
        } else {
            c
        }
    }

    /// A per-work-item base index: ids and loop variables, as kernels index.
    fn base(&mut self) -> String {
        let vars = self.vars(T::Usize);
        let nd = if self.nd { 1 } else { 0 };
        match self.rng.weighted(&[
            5,
            2 * nd,
            2 * nd,
            if vars.is_empty() { 0 } else { 4 },
            1,
            if self.loop_vars.is_empty() { 0 } else { 10 },
        ]) {
            5 => {
                // Mostly the innermost loop's variable.
                if self.rng.chance(70) {
                    self.loop_vars.last().expect("a loop").clone()
                } else {
                    self.rng.pick(&self.loop_vars).clone()
                }
            }
            0 => format!("global_id({})", self.dim()),
            1 => format!("local_id({})", self.dim()),
            2 => {
                let d = self.dim();
                format!("(group_id({d}) * local_range({d}) + local_id({d}))")
            }
            3 => self.rng.pick(&vars).clone(),
            _ => {
                let e = self.leaf(T::U32, 0);
                format!("({e} as usize)")
            }
        }
    }

    /// An index (`usize`) into `target`: mostly the shapes kernels use, many of them at the
    /// edge of a bound (where a wrong proof shows), sometimes anything.
    fn index(&mut self, depth: u32, target: &str) -> String {
        // The slice whose length bounds the index: mostly the indexed one.
        let s = if self.rng.chance(70) {
            target.to_string()
        } else {
            self.rng.pick(SLICES_ALL).to_string()
        };
        let b = self.base();
        let k = self.rng.upto(1, 3);
        if !self.loop_vars.is_empty() && self.rng.chance(50) {
            // The innermost loop's variable at the edges of its range.
            let v = self.loop_vars.last().expect("a loop").clone();
            let c = self.rng.upto(1, 4);
            return match self.rng.below(12) {
                0 | 1 => v,
                2 | 3 => format!("({v} - {k}usize)"),
                4 => format!("({v} + {k}usize)"),
                5 => format!("(({v} + {}usize) - {k}usize)", k + self.rng.upto(0, 1)),
                6 => format!("({v} % {c}usize)"),
                7 => format!("({v} / {c}usize)"),
                8 => format!("({v} >> 1usize)"),
                9 => format!("({v} & {}usize)", self.rng.upto(0, 15)),
                10 => format!("({v}).min({s}.len())"),
                _ => format!("((({v} as u32) + {}u32) as usize)", self.rng.upto(0, 2)),
            };
        }
        let w = [
            2, // anything
            1, // anything % len
            1, // anything.min(len - 1)
            1, // anything & 63
            4, // b
            2, // b + c
            2, // b * c + d
            2, // b % len
            2, // b.min(len - 1)
            1, // b / c
            1, // b & c
            1, // b >> 1
            2, // (b as u32 + v) as usize
            2, // b + scalar
            2, // len - 1 - b
            3, // b - k
            2, // (b + c) - k
            2, // b * w + o
            1, // b.min(c)
            2, // b.min(len)
            1, // len - b
            1, // b % c
        ];
        match self.rng.weighted(&w) {
            0 => self.expr(T::Usize, depth.min(3)),
            1 => format!("({} % {s}.len())", self.expr(T::Usize, depth.min(3))),
            2 => format!(
                "({}).min({s}.len() - 1usize)",
                self.expr(T::Usize, depth.min(3))
            ),
            3 => format!("({} & 63usize)", self.expr(T::Usize, depth.min(3))),
            4 => b,
            5 => format!("({b} + {})", self.small_lit(T::Usize, 0, 9)),
            6 => format!(
                "({b} * {} + {})",
                self.small_lit(T::Usize, 1, 4),
                self.small_lit(T::Usize, 0, 3)
            ),
            7 => format!("({b} % {s}.len())"),
            8 => format!("({b}).min({s}.len() - 1usize)"),
            9 => format!("({b} / {})", self.small_lit(T::Usize, 1, 4)),
            10 => format!("({b} & {})", self.small_lit(T::Usize, 0, 127)),
            11 => format!("({b} >> 1usize)"),
            12 => {
                let v = match self.rng.below(3) {
                    0 => self.small_lit(T::U32, 0, 9),
                    1 => self.rng.pick(&["a", "b"]).to_string(),
                    _ => self.expr(T::U32, depth.min(1)),
                };
                format!("((({b} as u32) + {v}) as usize)")
            }
            13 => {
                let o = match self.rng.below(3) {
                    0 => self.small_lit(T::Usize, 0, 9),
                    1 => self.rng.pick(&["n", "m"]).to_string(),
                    _ => self.leaf(T::Usize, 0),
                };
                format!("({b} + {o})")
            }
            14 => format!("({s}.len() - 1usize - {b})"),
            15 => format!("({b} - {k}usize)"),
            16 => format!("(({b} + {}usize) - {k}usize)", k + self.rng.upto(0, 1)),
            17 => {
                let d = self.dim();
                let w = if self.nd && self.rng.chance(50) {
                    format!("local_range({d})")
                } else {
                    format!("global_range({d})")
                };
                let o = self.base();
                format!("({b} * {w} + {o})")
            }
            18 => format!("({b}).min({})", self.small_lit(T::Usize, 0, 64)),
            19 => format!("({b}).min({s}.len())"),
            20 => format!("({s}.len() - {b})"),
            _ => format!("({b} % {})", self.small_lit(T::Usize, 1, 300)),
        }
    }

    /// A store to `out`, whose value depends on the index only.
    fn store_out(&mut self, depth: u32) {
        let i = self.index(depth, "out");
        if self.rng.chance(50) {
            let j = self.fresh("j");
            self.line(&format!("let {j} = {i};"));
            self.line(&format!("out[{j}] = ({j} as u32) * 3u32 + 1u32;"));
            self.declare(&j, T::Usize);
        } else {
            self.line(&format!("out[{i}] = ({i} as u32) * 3u32 + 1u32;"));
        }
    }

    /// A bounded loop end of type `t` (so that no loop runs long), and the slice (or `tile`)
    /// whose length bounds it, if one does.
    fn loop_end(&mut self, t: T) -> (String, Option<&'static str>) {
        let nested = self.loops > 0;
        // (Loops run over what they access: `x`, `y`, `out`, `tile`.)
        let s: &'static str = if self.tile.is_some() && self.rng.chance(25) {
            "tile"
        } else {
            SLICES_LOOP[self.rng.below(SLICES_LOOP.len() as u64) as usize]
        };
        match t {
            T::Usize => {
                let n = if nested { 4 } else { 9 };
                match self.rng.below(n) {
                    0 => (self.small_lit(t, 0, 12), None),
                    1 => {
                        let e = self.expr(t, 2);
                        (format!("({e}).min({})", self.small_lit(t, 0, 16)), None)
                    }
                    2 => {
                        let e = self.expr(t, 2);
                        (format!("({e} % {})", self.small_lit(t, 1, 16)), None)
                    }
                    3 if self.nd => (format!("local_range({})", self.dim()), None),
                    3 => (format!("n.min({})", self.small_lit(t, 0, 16)), None),
                    4 | 5 => (format!("{s}.len()"), Some(s)),
                    6 => {
                        let e = self.expr(t, 2);
                        (format!("({e}).min({s}.len())"), Some(s))
                    }
                    7 => (format!("global_range({})", self.dim()), None),
                    _ => {
                        let e = self.expr(t, 1);
                        let c = self.small_lit(t, 0, 8);
                        (format!("(({e}) + {c}).min({s}.len())"), Some(s))
                    }
                }
            }
            T::U32 => match self.rng.below(if nested { 3 } else { 5 }) {
                0 => (self.small_lit(t, 0, 12), None),
                1 => {
                    let e = self.expr(t, 2);
                    (format!("({e}).min({})", self.small_lit(t, 0, 16)), None)
                }
                2 => {
                    let e = self.expr(t, 2);
                    (format!("({e} % {})", self.small_lit(t, 1, 16)), None)
                }
                3 => (format!("({s}.len() as u32)"), Some(s)),
                _ => (format!("a.min({s}.len() as u32)"), Some(s)),
            },
        }
    }

    fn loop_start(&mut self, t: T) -> String {
        match self.rng.below(5) {
            0 => format!("0{}", t.name()),
            1 => self.small_lit(t, 0, 5),
            2 => match t {
                T::Usize => self.base(),
                T::U32 => {
                    let b = self.base();
                    format!("({b} as u32)")
                }
            },
            _ => self.expr(t, 2),
        }
    }

    fn step(&mut self) -> String {
        match self.rng.below(5) {
            0 | 1 => self.small_lit(T::Usize, 1, 5),
            2 if self.nd => format!("local_range({})", self.dim()),
            2 => format!("global_range({})", self.dim()),
            3 => {
                let e = self.expr(T::Usize, 2);
                format!("({e} % 4usize + 1usize)")
            }
            _ => format!("global_range({})", self.dim()),
        }
    }

    /// A `for` loop of a few statements.
    fn for_loop(&mut self) {
        let k = self.fresh("k");
        let (header, t, target) = match self.rng.below(10) {
            // Literal bounds: the variable's bounds are numbers.
            2..=4 => {
                let t = if self.rng.chance(80) {
                    T::Usize
                } else {
                    T::U32
                };
                let lo = self.rng.upto(0, 3);
                let hi = lo + self.rng.upto(0, 12);
                let dots = if self.rng.chance(30) { "..=" } else { ".." };
                let ty = t.name();
                (format!("for {k} in {lo}{ty}{dots}{hi}{ty} {{"), t, None)
            }
            // Grid-stride: `for k in (global_id(0)..len).step_by(global_range(0))`.
            0 => {
                let d = self.dim();
                let (end, target) = if self.loops > 0 {
                    self.loop_end(T::Usize)
                } else {
                    let s = self.rng.pick(SLICES_LOOP);
                    (format!("{s}.len()"), Some(*s))
                };
                (
                    format!("for {k} in (global_id({d})..{end}).step_by(global_range({d})) {{"),
                    T::Usize,
                    target,
                )
            }
            // A chunk: `let end = (begin + c).min(len); for k in begin..end`.
            1 => {
                let c = self.small_lit(T::Usize, 1, 8);
                let begin = self.fresh("begin");
                let end = self.fresh("end");
                let b = self.base();
                let s = self.rng.pick(SLICES_LOOP);
                self.line(&format!("let {begin} = {b} * {c};"));
                self.line(&format!("let {end} = ({begin} + {c}).min({s}.len());"));
                self.declare(&begin, T::Usize);
                self.declare(&end, T::Usize);
                (format!("for {k} in {begin}..{end} {{"), T::Usize, Some(*s))
            }
            _ => {
                let t = if self.rng.chance(75) {
                    T::Usize
                } else {
                    T::U32
                };
                let start = self.loop_start(t);
                let (end, target) = self.loop_end(t);
                let inclusive = if target.is_some() { 30 } else { 15 };
                let dots = if self.rng.chance(inclusive) {
                    "..="
                } else {
                    ".."
                };
                let h = if self.rng.chance(35) {
                    let st = self.step();
                    format!("for {k} in ({start}{dots}{end}).step_by({st}) {{")
                } else {
                    format!("for {k} in {start}{dots}{end} {{")
                };
                (h, t, target)
            }
        };
        self.line(&header);
        self.indent += 1;
        self.loops += 1;
        self.nesting += 1;
        self.scopes.push(vec![Var {
            name: k.clone(),
            ty: t,
        }]);
        if t == T::U32 {
            // The variable as an index too.
            let v = self.fresh("v");
            self.line(&format!("let {v} = {k} as usize;"));
            self.declare(&v, T::Usize);
            self.loop_vars.push(v);
        } else {
            self.loop_vars.push(k.clone());
        }
        self.loop_targets.push(target);
        let n = if self.focused {
            1 + self.rng.below(2)
        } else {
            1 + self.rng.below(3)
        };
        for _ in 0..n {
            self.stmt();
        }
        self.scopes.pop();
        self.loop_vars.pop();
        self.loop_targets.pop();
        self.nesting -= 1;
        self.loops -= 1;
        self.indent -= 1;
        self.line("}");
    }

    fn block(&mut self, n: u64) {
        self.indent += 1;
        self.nesting += 1;
        self.scopes.push(Vec::new());
        for _ in 0..n {
            self.stmt();
        }
        self.scopes.pop();
        self.nesting -= 1;
        self.indent -= 1;
    }

    /// A value for `s` or `res`.
    fn value(&mut self) -> String {
        if self.rng.chance(if self.loops > 0 { 85 } else { 60 }) {
            self.load(2)
        } else {
            self.expr(T::U32, 2)
        }
    }

    fn stmt(&mut self) {
        let deep = self.nesting >= 2;
        // In a loop body, mostly accesses (indexed by the loop's variable).
        let in_loop = self.loops > 0;
        let over_out = self.loop_targets.last() == Some(&Some("out"));
        // A focused kernel has little besides accesses.
        let extra = if self.focused { 0 } else { 1 };
        let w = [
            if in_loop { 1 } else { 3 }, // let
            extra,                       // let mut
            if in_loop { 9 } else { 5 }, // s +=
            if over_out {
                9
            } else if in_loop {
                3
            } else {
                2
            }, // out store
            extra,                       // atomic
            extra,                       // res
            if deep {
                0
            } else if in_loop {
                2
            } else {
                5
            }, // for
            if deep { 0 } else { 1 },    // if
            1,                           // let if
            if self.nesting == 0 { extra } else { 0 }, // early return
            if deep || in_loop { 0 } else { extra }, // while
        ];
        match self.rng.weighted(&w) {
            0 => {
                let t = if self.rng.chance(65) {
                    T::Usize
                } else {
                    T::U32
                };
                let name = self.fresh("l");
                let e = if t == T::Usize && self.rng.chance(65) {
                    let target = self.rng.pick(SLICES_ALL);
                    self.index(3, target)
                } else {
                    self.expr(t, 3)
                };
                self.line(&format!("let {name} = {e};"));
                self.declare(&name, t);
            }
            1 => {
                let t = if self.rng.chance(65) {
                    T::Usize
                } else {
                    T::U32
                };
                let name = self.fresh("w");
                let e = self.expr(t, 2);
                self.line(&format!("let mut {name} = {e};"));
                let e = self.expr(t, 2);
                let op = *self.rng.pick(&["+=", "-=", "*=", "=", "&="]);
                self.line(&format!("{name} {op} {e};"));
                self.declare(&name, t);
            }
            2 => {
                let v = self.value();
                match self.rng.below(3) {
                    0 => self.line(&format!("s = s * 31u32 + {v};")),
                    1 => self.line(&format!("s ^= {v};")),
                    _ => self.line(&format!("s += {v};")),
                }
            }
            3 => self.store_out(3),
            4 => {
                let i = self.index(3, "acc");
                let v = self.value();
                self.line(&format!("atomic_fetch_add(acc, {i}, {v});"));
            }
            5 => {
                let v = self.value();
                let r = self.res_index.clone();
                let op = if self.rng.chance(70) { "+=" } else { "=" };
                self.line(&format!("res[{r}] {op} {v};"));
            }
            6 => self.for_loop(),
            7 => {
                let c = self.cond(2);
                self.line(&format!("if {c} {{"));
                let n = 1 + self.rng.below(2);
                self.block(n);
                if self.rng.chance(50) {
                    self.line("} else {");
                    let n = 1 + self.rng.below(2);
                    self.block(n);
                }
                self.line("}");
            }
            8 => {
                let t = if self.rng.chance(65) {
                    T::Usize
                } else {
                    T::U32
                };
                let name = self.fresh("q");
                let c = self.cond(2);
                if self.rng.chance(50) {
                    let (x, y) = (self.expr(t, 2), self.expr(t, 2));
                    self.line(&format!("let {name} = if {c} {{ {x} }} else {{ {y} }};"));
                } else {
                    // Branches with statements.
                    let tmp = self.fresh("t");
                    let (x, y, z) = (self.expr(t, 2), self.expr(t, 1), self.expr(t, 2));
                    self.line(&format!(
                        "let {name} = if {c} {{ let {tmp} = {x}; {tmp} + {y} }} else {{ {z} }};"
                    ));
                }
                self.declare(&name, t);
            }
            9 => {
                let c = self.cond(2);
                self.line(&format!("if {c} {{"));
                self.line("    return;");
                self.line("}");
            }
            _ => {
                let w = self.fresh("c");
                let start = self.small_lit(T::Usize, 0, 3);
                let lim = self.small_lit(T::Usize, 0, 6);
                let step = self.small_lit(T::Usize, 1, 3);
                self.line(&format!("let mut {w} = {start};"));
                self.line(&format!("while {w} < {lim} {{"));
                self.indent += 1;
                self.scopes.push(vec![Var {
                    name: w.clone(),
                    ty: T::Usize,
                }]);
                let v = self.load(2);
                self.line(&format!("s += {v};"));
                self.line(&format!("{w} += {step};"));
                self.scopes.pop();
                self.indent -= 1;
                self.line("}");
            }
        }
    }

    /// An index of `res` that differs between all work-items of a launch.
    fn res_index_form(&mut self) -> String {
        let g = |d: u8| format!("global_id({d})");
        let lin = match self.dims {
            1 => {
                if self.nd && self.rng.chance(40) {
                    "(group_id(0) * local_range(0) + local_id(0))".to_string()
                } else {
                    g(0)
                }
            }
            2 => {
                if self.rng.chance(50) {
                    format!("({} * global_range(1) + {})", g(0), g(1))
                } else if self.nd && self.rng.chance(50) {
                    "((group_id(1) * local_range(1) + local_id(1)) * global_range(0) + global_id(0))"
                        .to_string()
                } else {
                    format!("({} * global_range(0) + {})", g(1), g(0))
                }
            }
            _ => format!(
                "(({} * global_range(1) + {}) * global_range(2) + {})",
                g(0),
                g(1),
                g(2)
            ),
        };
        match self.rng.below(7) {
            0..=2 => lin,
            3 => format!("({lin} + n)"),
            4 => format!("({lin} * 2usize + 1usize)"),
            5 => format!("(((({lin}) as u32) + a) as usize)"),
            _ if self.dims == 1 => format!("(global_range(0) - 1usize - {lin})"),
            _ => format!("({lin} + m)"),
        }
    }

    /// A work-group kernel's local index, one per work-item of the group.
    fn local_index_form(&self) -> String {
        match self.dims {
            1 => "local_id(0)".to_string(),
            2 => "(local_id(0) * local_range(1) + local_id(1))".to_string(),
            _ => "((local_id(0) * local_range(1) + local_id(1)) * local_range(2) + local_id(2))"
                .to_string(),
        }
    }
}

/// One kernel: its body, its dimensions, whether it needs an nd-range.
fn kernel(rng: &mut Rng) -> (String, u8, bool, u64) {
    let dims = match rng.below(10) {
        0..=5 => 1,
        6..=8 => 2,
        _ => 3,
    };
    let focused = rng.chance(70);
    let kind = rng.below(10);
    let group = kind >= 7; // local array and barriers
    let nd = group || kind >= 4;
    let tile = if group {
        Some(*rng.pick(&[8usize, 16, 32, 64, 128, 256]))
    } else {
        None
    };
    let mut g = Gen {
        rng,
        dims,
        nd,
        tile,
        tile_readable: false,
        scopes: vec![Vec::new()],
        next_local: 0,
        loops: 0,
        nesting: 0,
        loop_vars: Vec::new(),
        loop_targets: Vec::new(),
        focused,
        res_index: String::new(),
        out: String::new(),
        indent: 1,
    };
    let r = g.res_index_form();
    if g.rng.chance(50) {
        g.line(&format!("let r = {r};"));
        g.res_index = "r".to_string();
    } else {
        g.res_index = r;
    }
    if let Some(n) = tile {
        g.out = format!("    let tile = local_array::<u32, {n}>();\n") + &g.out;
        // Zeroed by every work-item: same values, so no race matters.
        if g.rng.chance(50) {
            g.line(&format!("for z in 0usize..{n}usize {{"));
        } else {
            g.line("for z in 0..tile.len() {");
        }
        g.line("    tile[z] = 0u32;");
        g.line("}");
        g.line("barrier();");
    }
    g.line("let mut s = 0u32;");
    if focused {
        g.line("s += a;");
    } else {
        let first = g.load(1);
        g.line(&format!("s += {first};"));
    }
    let local = g.local_index_form();
    let per_item_tile = g.rng.chance(60);
    if tile.is_some() {
        // The writes: one element per work-item, or values that depend on the index only.
        let n = 1 + g.rng.below(2);
        for _ in 0..n {
            if per_item_tile {
                let v = g.value();
                g.line(&format!("tile[{local}] = {v};"));
            } else {
                let i = g.index(2, "tile");
                g.line(&format!("tile[{i}] = ({i} as u32) * 5u32 + 2u32;"));
            }
        }
        g.line("barrier();");
        g.tile_readable = true;
    }
    // A focused kernel is a few probes of one or two statements, each under `if p == i`: a
    // launch runs one (the launch picks `p`), so an access out of bounds in one probe does
    // not hide a wrong proof in another by failing the launch in both forms. (The bounds
    // analysis does not look at conditions: the `if` changes no proof.)
    let probes = if focused { 3 + g.rng.below(4) } else { 0 };
    if focused {
        for i in 0..probes {
            g.line(&format!("if p == {i}u32 {{"));
            g.indent += 1;
            g.scopes.push(Vec::new());
            let n = 1 + g.rng.below(2);
            for j in 0..n {
                if j == 0 && g.rng.chance(60) {
                    g.for_loop();
                } else {
                    g.stmt();
                }
            }
            g.scopes.pop();
            g.indent -= 1;
            g.line("}");
        }
    } else {
        let n = 2 + g.rng.below(4);
        for i in 0..n {
            if i == 0 && g.rng.chance(50) {
                g.for_loop();
            } else {
                g.stmt();
            }
        }
    }
    if tile.is_some() && per_item_tile && g.rng.chance(60) {
        // A tiled loop: load, barrier, read the tile, barrier.
        g.line("barrier();");
        let t_end = match g.rng.below(4) {
            0 => g.small_lit(T::Usize, 1, 3),
            1 => "(x.len() / local_range(0)).min(3usize)".to_string(),
            2 => "(n % 3usize + 1usize)".to_string(),
            _ => "group_range(0).min(3usize)".to_string(),
        };
        let k_end = *g.rng.pick(&[
            "local_range(0)",
            "tile.len()",
            "local_range(0).min(tile.len())",
        ]);
        let src = *g.rng.pick(&[
            "t * local_range(0) + local_id(0)",
            "t * global_range(0) + global_id(0)",
            "(t * group_range(0) + group_id(0)) * local_range(0) + local_id(0)",
        ]);
        g.line(&format!("for t in 0usize..{t_end} {{"));
        g.line(&format!("    tile[{local}] = x[{src}];"));
        g.line("    barrier();");
        g.line(&format!("    for kk in 0usize..{k_end} {{"));
        g.line("        s += tile[kk];");
        g.line("    }");
        g.line("    barrier();");
        g.line("}");
    }
    let r = g.res_index.clone();
    g.line(&format!("res[{r}] += s;"));
    (g.out, dims, nd, probes)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SYCL_RS_PROOF_SEED");
    println!("cargo:rerun-if-env-changed=SYCL_RS_PROOF_KERNELS");
    let seed = std::env::var("SYCL_RS_PROOF_SEED")
        .ok()
        .map(|s| {
            let s = s.trim();
            match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            }
            .unwrap_or_else(|e| panic!("SYCL_RS_PROOF_SEED `{s}`: {e}"))
        })
        .unwrap_or(DEFAULT_SEED);
    let count = std::env::var("SYCL_RS_PROOF_KERNELS")
        .ok()
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|e| panic!("SYCL_RS_PROOF_KERNELS `{s}`: {e}"))
        })
        .unwrap_or(DEFAULT_KERNELS);
    let mut rng = Rng(seed);
    let mut file = String::new();
    let _ = writeln!(
        file,
        "// Generated by tests/build.rs from seed {seed:#x}: {count} kernels, each with and without bounds proofs.\n"
    );
    let _ = writeln!(file, "/// The seed the kernels were generated from.");
    let _ = writeln!(file, "pub const SEED: u64 = {seed:#x};\n");
    let mut table = String::new();
    let mut tests = String::new();
    for i in 0..count {
        let (body, dims, nd, probes) = kernel(&mut rng);
        let params = "x: &[u32], y: &[u32], out: &mut [u32], acc: &mut [u32], res: &mut [u32], a: u32, b: u32, n: usize, m: usize, p: u32";
        let source = format!("#[sycl::kernel]\nfn k{i}({params}) {{\n{body}}}\n");
        let _ = writeln!(file, "{source}");
        let _ = writeln!(
            file,
            "#[sycl::kernel(__no_proofs)]\nfn k{i}_unproved({params}) {{\n{body}}}\n"
        );
        let args = "&g.x, &g.y, &g.out, &g.acc, &g.res, g.a, g.b, g.n, g.m, g.p";
        let _ = writeln!(
            file,
            "fn launch_k{i}(q: &sycl::Queue, r: sycl::Range, g: &Args) -> sycl::Result<sycl::Event> {{\n    q.parallel_for(r, &[], k{i}({args}))\n}}\n"
        );
        let _ = writeln!(
            file,
            "fn launch_k{i}_unproved(q: &sycl::Queue, r: sycl::Range, g: &Args) -> sycl::Result<sycl::Event> {{\n    q.parallel_for(r, &[], k{i}_unproved({args}))\n}}\n"
        );
        let _ = writeln!(
            file,
            "fn test_k{i}(d: &sycl::Device) -> Result<(), libtest_mimic::Failed> {{\n    test_kernel(d, {i})\n}}\n"
        );
        let _ = writeln!(
            table,
            "    GenKernel {{ index: {i}, source: {source:?}, dims: {dims}, nd: {nd}, probes: {probes}, proved: launch_k{i}, unproved: launch_k{i}_unproved }},"
        );
        let _ = writeln!(
            tests,
            "    DeviceTest {{ name: \"proofs::k{i}\", needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations], run: test_k{i} }},"
        );
    }
    let _ = writeln!(
        file,
        "/// Every kernel.\npub const KERNELS: &[GenKernel] = &[\n{table}];\n"
    );
    let _ = writeln!(
        file,
        "/// One test per kernel (and device).\npub const DEVICE_TESTS: &[DeviceTest] = &[\n{tests}];"
    );
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("random_kernels.rs"), file).expect("write random_kernels.rs");
}
