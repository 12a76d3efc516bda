//! The kernel language as parsed: statements and expressions with their source spans, helper
//! paths and type variables ([`Types`]: literals' types are inferred as Rust infers them).
//! The scalar type and the operators are the shared IR crate's (`sycl-kernel-ir`);
//! `encode.rs` lowers a checked function to that crate's `Function`, with resolved types and
//! the bounds analysis' results, which is what every back end reads.

use proc_macro2::Span;

pub use sycl_kernel_ir::Scalar as Ty;
pub use sycl_kernel_ir::{AtomicOp, BinOp, MathFn, Query, Reduce, SubGroupOp, SubGroupQuery, UnOp};

/// A type while parsing: an index into [`Types`].
pub type TyId = usize;

#[derive(Clone, Copy, Debug)]
enum TyState {
    Known(Ty),
    /// An unsuffixed integer literal's type, not decided yet (defaults to i32).
    IntVar,
    /// An unsuffixed float literal's type (defaults to f64).
    FloatVar,
    /// A helper call's result, known only from its use (no default).
    Unknown,
    Link(TyId),
}

/// Type variables and their solutions (union-find), as Rust infers literal types.
#[derive(Default)]
pub struct Types {
    states: Vec<TyState>,
}

impl Types {
    pub fn known(&mut self, ty: Ty) -> TyId {
        self.states.push(TyState::Known(ty));
        self.states.len() - 1
    }

    pub fn int_var(&mut self) -> TyId {
        self.states.push(TyState::IntVar);
        self.states.len() - 1
    }

    pub fn float_var(&mut self) -> TyId {
        self.states.push(TyState::FloatVar);
        self.states.len() - 1
    }

    pub fn unknown(&mut self) -> TyId {
        self.states.push(TyState::Unknown);
        self.states.len() - 1
    }

    fn root(&self, mut id: TyId) -> TyId {
        while let TyState::Link(next) = self.states[id] {
            id = next;
        }
        id
    }

    /// The type if it is decided now.
    pub fn get(&self, id: TyId) -> Option<Ty> {
        match self.states[self.root(id)] {
            TyState::Known(t) => Some(t),
            _ => None,
        }
    }

    /// Whether the type is an integer (decided or an integer literal).
    pub fn is_int(&self, id: TyId) -> bool {
        match self.states[self.root(id)] {
            TyState::Known(t) => t.is_int(),
            TyState::IntVar => true,
            _ => false,
        }
    }

    /// Whether the type is a float (decided or a float literal).
    pub fn is_float(&self, id: TyId) -> bool {
        match self.states[self.root(id)] {
            TyState::Known(t) => t.is_float(),
            TyState::FloatVar => true,
            _ => false,
        }
    }

    /// Makes `a` and `b` one type; `Err` with both descriptions when they cannot be.
    pub fn unify(&mut self, a: TyId, b: TyId) -> Result<(), (String, String)> {
        let (ra, rb) = (self.root(a), self.root(b));
        if ra == rb {
            return Ok(());
        }
        let (sa, sb) = (self.states[ra], self.states[rb]);
        let merged = match (sa, sb) {
            (TyState::Known(x), TyState::Known(y)) if x == y => TyState::Known(x),
            (TyState::Known(x), TyState::IntVar) | (TyState::IntVar, TyState::Known(x))
                if x.is_int() =>
            {
                TyState::Known(x)
            }
            (TyState::Known(x), TyState::FloatVar) | (TyState::FloatVar, TyState::Known(x))
                if x.is_float() =>
            {
                TyState::Known(x)
            }
            (TyState::IntVar, TyState::IntVar) => TyState::IntVar,
            (TyState::FloatVar, TyState::FloatVar) => TyState::FloatVar,
            (TyState::Unknown, other) | (other, TyState::Unknown) => other,
            _ => return Err((self.describe(a), self.describe(b))),
        };
        self.states[rb] = merged;
        self.states[ra] = TyState::Link(rb);
        Ok(())
    }

    pub fn describe(&self, id: TyId) -> String {
        match self.states[self.root(id)] {
            TyState::Known(t) => format!("`{}`", t.name()),
            TyState::IntVar => "an integer".into(),
            TyState::FloatVar => "a float".into(),
            TyState::Unknown => "an unknown type".into(),
            TyState::Link(_) => unreachable!("root"),
        }
    }

    /// The final type: literal variables take Rust's defaults; `None` for a helper result
    /// nothing decided.
    pub fn resolve(&self, id: TyId) -> Option<Ty> {
        match self.states[self.root(id)] {
            TyState::Known(t) => Some(t),
            TyState::IntVar => Some(Ty::I32),
            TyState::FloatVar => Some(Ty::F64),
            TyState::Unknown => None,
            TyState::Link(_) => unreachable!("root"),
        }
    }
}

/// A kernel or helper parameter.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Scalar(Ty),
    /// `&[T]` (read) or `&mut [T]` (written): USM memory and its length.
    Slice {
        elem: Ty,
        mutable: bool,
    },
}

/// A local variable (scalar) or work-group local array.
#[derive(Clone, Debug)]
pub struct Local {
    pub name: String,
    pub ty: TyId,
    /// Assigned after its `let` (declared `mut`, or the target of a lowered `if` value).
    pub mutable: bool,
    /// Declared `let mut`: the user may assign it.
    pub user_mut: bool,
    /// `Some(len)` for a work-group local array of that many elements.
    pub array: Option<usize>,
}

/// What an element access reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    /// A slice parameter (index into the parameters).
    Param(usize),
    /// A work-group local array (index into the locals).
    Local(usize),
}

#[derive(Clone, Debug)]
pub enum Lit {
    /// The zero of its type (`false`, `0`, `0.0`): the placeholder value of a lowered `if`.
    Zero,
    Int(u128),
    /// The literal's digits (no suffix), parsed at its final type by each emitter: parsing
    /// once as f64 and rounding to f32 could round twice.
    Float(String),
    Bool(bool),
}

/// An expression with its type.
#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: TyId,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Lit(Lit),
    Local(usize),
    Param(usize),
    /// An element of a slice or local array (`checked: false` inside `unsafe` with
    /// `get_unchecked`).
    Load {
        base: Base,
        index: Box<Expr>,
        checked: bool,
    },
    Len(Base),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Cast(Box<Expr>, Ty),
    Math(MathFn, Vec<Expr>),
    Query(Query, u8),
    Atomic {
        op: AtomicOp,
        base: Base,
        index: Box<Expr>,
        values: Vec<Expr>,
    },
    Reduce(Reduce, Box<Expr>),
    SubGroupQuery(SubGroupQuery),
    /// A sub-group collective: the value, then the lane (delta, mask) where the op takes one.
    SubGroup(SubGroupOp, Vec<Expr>),
    /// A helper (`#[sycl::kernel_fn]`): its path as written, and arguments.
    Call(syn::Path, Vec<Expr>),
    /// `if c { a } else { b }` as a value.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
}

/// Where an assignment stores.
#[derive(Clone, Debug)]
pub enum Place {
    Local(usize),
    Elem {
        base: Base,
        index: Expr,
        checked: bool,
    },
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum StmtKind {
    Let(usize, Expr),
    /// A work-group local array comes into scope.
    LocalArray,
    Assign(Place, Option<BinOp>, Expr),
    Expr(Expr),
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    While(Expr, Vec<Stmt>),
    Loop(Vec<Stmt>),
    For {
        var: usize,
        start: Expr,
        end: Expr,
        inclusive: bool,
        /// `(a..b).step_by(s)`: `s`, a `usize`.
        step: Option<Expr>,
        body: Vec<Stmt>,
    },
    Break,
    Continue,
    Return(Option<Expr>),
    Barrier,
}

/// A parsed kernel or helper.
pub struct Function {
    pub params: Vec<Param>,
    /// Helpers return a scalar; kernels nothing.
    pub ret: Option<Ty>,
    pub locals: Vec<Local>,
    pub body: Vec<Stmt>,
    pub types: Types,
}

impl Function {
    /// The resolved type of `id` (every type is resolved once parsing succeeded).
    pub fn ty(&self, id: TyId) -> Ty {
        self.types
            .resolve(id)
            .expect("types are resolved before emission")
    }
}
