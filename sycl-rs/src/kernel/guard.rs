//! Run-time guards of generated GPU kernels, tested on the host at each launch.
//!
//! The bounds analysis of `#[sycl::kernel]` proves some accesses in bounds only under a
//! condition over values that are the same for the whole launch: scalar parameters, slice
//! lengths, the range and the work-group size (`global_range(0) <= x.len()` for `x[global_id(0)]`,
//! or `(group_range(1) - 1) * 16 + 15 < tile.len()`). Its C text comes with the definition
//! (`DefinitionParts::guard`). Testing it inside the kernel would mean a branch around the
//! whole body, which CPU OpenCL compilers vectorise poorly and one of them (Intel's 2026.2)
//! miscompiled around barriers; so the runtime evaluates it here, with the same saturating
//! `u64` arithmetic as the preludes' `sycl_b*` functions, and builds the program with
//! `SYCL_GUARDED` 1 (those checks fold away) when it holds, 0 when it does not.
//!
//! Soundness: the condition is evaluated exactly as C would evaluate it in the kernel (same
//! values, same operations); anything this parser does not know makes the definition fail to
//! resolve (a bug of the macro, reported at the first launch), and a value it cannot supply
//! makes the guard false, never true.

use std::collections::HashMap;

/// A parsed guard: its bound constants, then the condition over them.
#[derive(Debug)]
pub(crate) struct Guard {
    consts: Vec<Node>,
    cond: Node,
}

/// The launch's values a guard may name.
pub(crate) struct GuardEnv<'a> {
    /// The kernel's dimensions (SYCL's dimension `d` is the GPU's `dims - 1 - d`).
    pub dims: u8,
    /// Per parameter: its value when it is an unsigned scalar, its length when a slice.
    pub params: &'a [ParamValue],
    /// `global_range(d)` in SYCL order.
    pub range: [u64; 3],
    /// Work-group size in GPU order.
    pub local: [usize; 3],
    /// Number of work-groups in GPU order.
    pub groups: [usize; 3],
}

/// A parameter's launch value as guards see it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ParamValue {
    /// An unsigned scalar (zero-extended).
    Unsigned(u64),
    /// A slice of this many elements.
    Slice(u64),
    /// Anything else (guards never name it).
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound {
    Add,
    Mul,
    Sub,
    Div,
    Min,
    Max,
    WrapLo,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

/// An axis as the C text names it: `SYCL_AXIS(d)` (SYCL dimension `d`) or a GPU axis number.
#[derive(Clone, Copy, Debug)]
enum Axis {
    Sycl(u8),
    Gpu(u8),
}

#[derive(Debug)]
enum Node {
    Num(u64),
    Const(usize),
    Param(usize),
    Len(usize),
    Range(u8),
    LocalRange(Axis),
    GroupRange(Axis),
    Call(Bound, Vec<Node>),
    Cmp(Cmp, Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Select(Box<Node>, Box<Node>, Box<Node>),
}

impl Guard {
    /// Parses `DefinitionParts::guard`: `const sycl_u64 NAME = EXPR;` lines, then the
    /// condition. `Ok(None)` for an empty text (no guard).
    pub(crate) fn parse(text: &str) -> Result<Option<Guard>, String> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        let mut names: HashMap<String, usize> = HashMap::new();
        let mut consts = Vec::new();
        let mut lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let cond = lines.pop().ok_or("no condition")?;
        for line in lines {
            let decl = line
                .trim()
                .strip_prefix("const sycl_u64 ")
                .and_then(|d| d.strip_suffix(';'))
                .ok_or_else(|| format!("not a bound declaration: {line}"))?;
            let (name, expr) = decl
                .split_once(" = ")
                .ok_or_else(|| format!("not a bound declaration: {line}"))?;
            let node = Parser::new(expr, &names).whole()?;
            names.insert(name.to_owned(), consts.len());
            consts.push(node);
        }
        let cond = Parser::new(cond, &names).whole()?;
        Ok(Some(Guard { consts, cond }))
    }

    /// Whether the guard holds for this launch (false where it names a value the launch does
    /// not have).
    pub(crate) fn holds(&self, env: &GuardEnv<'_>) -> bool {
        let mut values = Vec::with_capacity(self.consts.len());
        for c in &self.consts {
            match eval(c, env, &values) {
                Some(v) => values.push(v),
                None => return false,
            }
        }
        eval(&self.cond, env, &values).is_some_and(|v| v != 0)
    }
}

fn gpu_axis(axis: Axis, dims: u8) -> Option<usize> {
    let a = match axis {
        Axis::Sycl(d) => dims.checked_sub(1)?.checked_sub(d)?,
        Axis::Gpu(a) => a,
    };
    (a < 3).then_some(a as usize)
}

/// `node`'s value in C's `sycl_u64` arithmetic, with the preludes' `sycl_b*` functions
/// (prelude_bounds.h); comparisons and `&&` give 0 or 1.
fn eval(node: &Node, env: &GuardEnv<'_>, consts: &[u64]) -> Option<u64> {
    let v = |n: &Node| eval(n, env, consts);
    Some(match node {
        Node::Num(n) => *n,
        Node::Const(i) => *consts.get(*i)?,
        Node::Param(i) => match env.params.get(*i)? {
            ParamValue::Unsigned(x) => *x,
            _ => return None,
        },
        Node::Len(i) => match env.params.get(*i)? {
            ParamValue::Slice(n) => *n,
            _ => return None,
        },
        Node::Range(d) => *env.range.get(*d as usize)?,
        Node::LocalRange(a) => env.local[gpu_axis(*a, env.dims)?] as u64,
        Node::GroupRange(a) => env.groups[gpu_axis(*a, env.dims)?] as u64,
        Node::Call(f, args) => {
            let x: Vec<u64> = args.iter().map(v).collect::<Option<_>>()?;
            match (f, x.as_slice()) {
                (Bound::Add, [a, b]) => a.saturating_add(*b),
                (Bound::Mul, [a, b]) => a.saturating_mul(*b),
                (Bound::Sub, [a, b]) => a.saturating_sub(*b),
                (Bound::Div, [a, b]) => a.checked_div(*b).unwrap_or(*a),
                (Bound::Min, [a, b]) => *a.min(b),
                (Bound::Max, [a, b]) => *a.max(b),
                (Bound::WrapLo, [hi, lo, max]) => {
                    if hi >= max {
                        0
                    } else {
                        *lo
                    }
                }
                _ => return None,
            }
        }
        Node::Cmp(op, a, b) => {
            let (a, b) = (v(a)?, v(b)?);
            u64::from(match op {
                Cmp::Lt => a < b,
                Cmp::Le => a <= b,
                Cmp::Gt => a > b,
                Cmp::Ge => a >= b,
                Cmp::Eq => a == b,
            })
        }
        Node::And(a, b) => u64::from(v(a)? != 0 && v(b)? != 0),
        Node::Select(c, a, b) => {
            if v(c)? != 0 {
                v(a)?
            } else {
                v(b)?
            }
        }
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Ident(String),
    Num(u64),
    Punct(&'static str),
}

struct Parser<'a> {
    tokens: Vec<Token>,
    at: usize,
    names: &'a HashMap<String, usize>,
    error: Option<String>,
}

const PUNCTS: [&str; 12] = [
    "&&", "<=", ">=", "==", "(", ")", ",", "?", ":", "<", ">", ";",
];

impl<'a> Parser<'a> {
    fn new(text: &str, names: &'a HashMap<String, usize>) -> Parser<'a> {
        let mut tokens = Vec::new();
        let mut error = None;
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            let c = rest.chars().next().expect("not empty");
            let len = if c.is_ascii_alphabetic() || c == '_' {
                let n = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                tokens.push(Token::Ident(rest[..n].to_owned()));
                n
            } else if c.is_ascii_digit() {
                let n = rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
                match rest[..n].parse() {
                    Ok(v) => tokens.push(Token::Num(v)),
                    Err(_) => error = Some(format!("number out of range: {}", &rest[..n])),
                }
                n
            } else if let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) {
                tokens.push(Token::Punct(p));
                p.len()
            } else {
                error = Some(format!("unexpected `{c}`"));
                break;
            };
            rest = rest[len..].trim_start();
        }
        Parser {
            tokens,
            at: 0,
            names,
            error,
        }
    }

    fn whole(mut self) -> Result<Node, String> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let node = self.expr()?;
        match self.tokens.get(self.at) {
            None => Ok(node),
            Some(t) => Err(format!("unexpected {t:?} after the expression")),
        }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Some(Token::Punct(q)) if *q == p) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(format!("expected `{p}`, found {:?}", self.peek()))
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.tokens.get(self.at) {
            Some(Token::Ident(s)) => {
                self.at += 1;
                Ok(s.clone())
            }
            other => Err(format!("expected a name, found {other:?}")),
        }
    }

    fn num(&mut self) -> Result<u64, String> {
        match self.tokens.get(self.at) {
            Some(Token::Num(n)) => {
                self.at += 1;
                Ok(*n)
            }
            other => Err(format!("expected a number, found {other:?}")),
        }
    }

    /// `and ('?' expr ':' expr)?`
    fn expr(&mut self) -> Result<Node, String> {
        let c = self.and()?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            return Ok(Node::Select(Box::new(c), Box::new(a), Box::new(b)));
        }
        Ok(c)
    }

    /// `cmp ('&&' cmp)*`
    fn and(&mut self) -> Result<Node, String> {
        let mut left = self.cmp()?;
        while self.eat("&&") {
            let right = self.cmp()?;
            left = Node::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    /// `primary (op primary)?`
    fn cmp(&mut self) -> Result<Node, String> {
        let left = self.primary()?;
        let op = match self.peek() {
            Some(Token::Punct("<")) => Cmp::Lt,
            Some(Token::Punct("<=")) => Cmp::Le,
            Some(Token::Punct(">")) => Cmp::Gt,
            Some(Token::Punct(">=")) => Cmp::Ge,
            Some(Token::Punct("==")) => Cmp::Eq,
            _ => return Ok(left),
        };
        self.at += 1;
        let right = self.primary()?;
        Ok(Node::Cmp(op, Box::new(left), Box::new(right)))
    }

    fn primary(&mut self) -> Result<Node, String> {
        if self.eat("(") {
            // `(sycl_u64)x`: every value here already is one.
            if self.peek() == Some(&Token::Ident("sycl_u64".into()))
                && self.tokens.get(self.at + 1) == Some(&Token::Punct(")"))
            {
                self.at += 2;
                return self.primary();
            }
            let e = self.expr()?;
            self.expect(")")?;
            return Ok(e);
        }
        let name = self.ident()?;
        let call = |p: &mut Self, n: usize| -> Result<Vec<Node>, String> {
            p.expect("(")?;
            let mut args = Vec::with_capacity(n);
            for i in 0..n {
                if i > 0 {
                    p.expect(",")?;
                }
                args.push(p.expr()?);
            }
            p.expect(")")?;
            Ok(args)
        };
        let bound = match name.as_str() {
            "sycl_badd" => Some((Bound::Add, 2)),
            "sycl_bmul" => Some((Bound::Mul, 2)),
            "sycl_bsub" => Some((Bound::Sub, 2)),
            "sycl_bdiv" => Some((Bound::Div, 2)),
            "sycl_bmin" => Some((Bound::Min, 2)),
            "sycl_bmax" => Some((Bound::Max, 2)),
            "sycl_bwrap_lo" => Some((Bound::WrapLo, 3)),
            _ => None,
        };
        if let Some((f, n)) = bound {
            return Ok(Node::Call(f, call(self, n)?));
        }
        match name.as_str() {
            "SYCL_U64C" => {
                self.expect("(")?;
                let n = self.num()?;
                self.expect(")")?;
                Ok(Node::Num(n))
            }
            "SYCL_LOCAL_RANGE" => Ok(Node::LocalRange(self.axis_arg()?)),
            "sycl_group_range" => Ok(Node::GroupRange(self.axis_arg()?)),
            _ => {
                if let Some(&i) = self.names.get(&name) {
                    return Ok(Node::Const(i));
                }
                let index = |s: &str| s.parse::<usize>().ok();
                if let Some(d) = name.strip_prefix("sycl_r").and_then(index) {
                    if d < 3 {
                        return Ok(Node::Range(d as u8));
                    }
                }
                if let Some(rest) = name.strip_prefix('p') {
                    if let Some(i) = rest.strip_suffix("_len").and_then(index) {
                        return Ok(Node::Len(i));
                    }
                    if let Some(i) = index(rest) {
                        return Ok(Node::Param(i));
                    }
                }
                Err(format!("unknown name `{name}`"))
            }
        }
    }

    /// `(SYCL_AXIS(d))` or `(a)`.
    fn axis_arg(&mut self) -> Result<Axis, String> {
        self.expect("(")?;
        let axis = if self.eat("(") {
            let a = self.axis()?;
            self.expect(")")?;
            a
        } else {
            self.axis()?
        };
        self.expect(")")?;
        Ok(axis)
    }

    fn axis(&mut self) -> Result<Axis, String> {
        if let Some(Token::Num(_)) = self.peek() {
            let n = self.num()?;
            return u8::try_from(n)
                .map(Axis::Gpu)
                .map_err(|_| format!("axis {n}"));
        }
        let name = self.ident()?;
        if name != "SYCL_AXIS" {
            return Err(format!("expected an axis, found `{name}`"));
        }
        self.expect("(")?;
        let d = self.num()?;
        self.expect(")")?;
        u8::try_from(d)
            .map(Axis::Sycl)
            .map_err(|_| format!("dimension {d}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(params: &[ParamValue]) -> GuardEnv<'_> {
        GuardEnv {
            dims: 2,
            params,
            range: [64, 32, 1],
            local: [16, 8, 1],
            groups: [2, 8, 1],
        }
    }

    fn holds(text: &str, params: &[ParamValue]) -> bool {
        Guard::parse(text)
            .expect("parses")
            .expect("a guard")
            .holds(&env(params))
    }

    #[test]
    fn empty_text_is_no_guard() {
        assert!(Guard::parse("").unwrap().is_none());
    }

    #[test]
    fn range_against_length() {
        let g = "(sycl_r0 <= p1_len)";
        let ok = [ParamValue::Unsigned(3), ParamValue::Slice(64)];
        let short = [ParamValue::Unsigned(3), ParamValue::Slice(63)];
        assert!(holds(g, &ok));
        assert!(!holds(g, &short));
        // A scalar where a slice was expected: a value the launch cannot supply is false.
        assert!(!holds(g, &[ParamValue::Slice(1), ParamValue::Unsigned(64)]));
    }

    #[test]
    fn constants_axes_and_saturation() {
        // SYCL dimension 0 of a 2-D launch is GPU axis 1: local 8, 8 groups.
        let g = "const sycl_u64 sycl_b0 = sycl_bsub(((sycl_u64)SYCL_LOCAL_RANGE(SYCL_AXIS(0))), SYCL_U64C(1));\n\
                 const sycl_u64 sycl_b1 = sycl_badd(sycl_bmul(sycl_bsub(sycl_group_range(SYCL_AXIS(0)), SYCL_U64C(1)), SYCL_U64C(8)), sycl_b0);\n\
                 (sycl_b1 < p0_len)";
        // (8 - 1) * 8 + 7 = 63
        assert!(holds(g, &[ParamValue::Slice(64)]));
        assert!(!holds(g, &[ParamValue::Slice(63)]));
        // Saturation: u64::MAX * 2 stays at the maximum, which no length exceeds.
        let sat = "(sycl_bmul(SYCL_U64C(18446744073709551615), SYCL_U64C(2)) < p0_len)";
        assert!(!holds(sat, &[ParamValue::Slice(u64::MAX)]));
    }

    #[test]
    fn selects_and_conjunctions() {
        let g = "((((sycl_u64)p0) >= SYCL_U64C(4)) ? sycl_bsub(((sycl_u64)p0), SYCL_U64C(4)) : SYCL_U64C(18446744073709551615)) < p1_len && (sycl_r1 <= p1_len)";
        assert!(holds(g, &[ParamValue::Unsigned(10), ParamValue::Slice(32)]));
        // p0 < 4: the select gives the maximum, so the guard fails.
        assert!(!holds(g, &[ParamValue::Unsigned(3), ParamValue::Slice(32)]));
        assert!(!holds(
            g,
            &[ParamValue::Unsigned(10), ParamValue::Slice(31)]
        ));
        assert!(holds(
            "(sycl_bwrap_lo(SYCL_U64C(5), SYCL_U64C(1), SYCL_U64C(5)) < SYCL_U64C(1))",
            &[]
        ));
        assert!(holds(
            "(sycl_bdiv(SYCL_U64C(7), SYCL_U64C(0)) == SYCL_U64C(7))",
            &[]
        ));
    }

    #[test]
    fn unknown_text_is_an_error() {
        for bad in [
            "(x < p0_len)",
            "(sycl_r0 <= p0_len",
            "const sycl_u64 a = 1\n(a < 2)",
            "(sycl_r0 <= p0_len) junk",
            "(99999999999999999999999 < p0_len)",
            "(sycl_r0 + 1 <= p0_len)",
        ] {
            assert!(Guard::parse(bad).is_err(), "{bad}");
        }
    }
}
