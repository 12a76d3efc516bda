//! The kernel language after parsing: typed statements and expressions that every emitter
//! (native CPU Rust, CUDA C++, OpenCL C) reads. Types are ids into [`Types`] while parsing and
//! resolved to [`Ty`] before emission.

use proc_macro2::Span;

/// The scalar types of the kernel language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Bool,
    I32,
    U32,
    I64,
    U64,
    Usize,
    F32,
    F64,
}

impl Ty {
    pub fn from_name(name: &str) -> Option<Ty> {
        Some(match name {
            "bool" => Ty::Bool,
            "i32" => Ty::I32,
            "u32" => Ty::U32,
            "i64" => Ty::I64,
            "u64" => Ty::U64,
            "usize" => Ty::Usize,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            _ => return None,
        })
    }

    pub fn rust(self) -> &'static str {
        match self {
            Ty::Bool => "bool",
            Ty::I32 => "i32",
            Ty::U32 => "u32",
            Ty::I64 => "i64",
            Ty::U64 => "u64",
            Ty::Usize => "usize",
            Ty::F32 => "f32",
            Ty::F64 => "f64",
        }
    }

    pub fn is_int(self) -> bool {
        matches!(self, Ty::I32 | Ty::U32 | Ty::I64 | Ty::U64 | Ty::Usize)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Ty::I32 | Ty::I64)
    }

    pub fn is_float(self) -> bool {
        matches!(self, Ty::F32 | Ty::F64)
    }

    pub fn is_numeric(self) -> bool {
        self.is_int() || self.is_float()
    }

    pub fn bits(self) -> u32 {
        match self {
            Ty::Bool => 8,
            Ty::I32 | Ty::U32 | Ty::F32 => 32,
            Ty::I64 | Ty::U64 | Ty::Usize | Ty::F64 => 64,
        }
    }

    /// The element types a slice (USM) or local array may have.
    pub fn is_element(self) -> bool {
        matches!(
            self,
            Ty::I32 | Ty::U32 | Ty::I64 | Ty::U64 | Ty::F32 | Ty::F64
        )
    }
}

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
            TyState::Known(t) => format!("`{}`", t.rust()),
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }

    pub fn c(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

/// Work-item and work-group queries (`global_id(d)`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    GlobalId,
    LocalId,
    GroupId,
    GlobalRange,
    LocalRange,
    GroupRange,
}

impl Query {
    pub fn from_name(name: &str) -> Option<Query> {
        Some(match name {
            "global_id" => Query::GlobalId,
            "local_id" => Query::LocalId,
            "group_id" => Query::GroupId,
            "global_range" => Query::GlobalRange,
            "local_range" => Query::LocalRange,
            "group_range" => Query::GroupRange,
            _ => return None,
        })
    }

    /// The same for every work-item of a work-group.
    pub fn is_uniform(self) -> bool {
        !matches!(self, Query::GlobalId | Query::LocalId)
    }
}

/// Math on floats (and `min`/`max`/`abs` on integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MathFn {
    Sqrt,
    Exp,
    Ln,
    Sin,
    Cos,
    Powf,
    MulAdd,
    Min,
    Max,
    Abs,
    Floor,
    Ceil,
}

impl MathFn {
    pub fn from_name(name: &str) -> Option<MathFn> {
        Some(match name {
            "sqrt" => MathFn::Sqrt,
            "exp" => MathFn::Exp,
            "ln" => MathFn::Ln,
            "sin" => MathFn::Sin,
            "cos" => MathFn::Cos,
            "powf" => MathFn::Powf,
            "mul_add" => MathFn::MulAdd,
            "min" => MathFn::Min,
            "max" => MathFn::Max,
            "abs" => MathFn::Abs,
            "floor" => MathFn::Floor,
            "ceil" => MathFn::Ceil,
            _ => return None,
        })
    }

    /// Arguments besides the receiver.
    pub fn extra_args(self) -> usize {
        match self {
            MathFn::Powf | MathFn::Min | MathFn::Max => 1,
            MathFn::MulAdd => 2,
            _ => 0,
        }
    }

    pub fn rust(self) -> &'static str {
        match self {
            MathFn::Sqrt => "sqrt",
            MathFn::Exp => "exp",
            MathFn::Ln => "ln",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Powf => "powf",
            MathFn::MulAdd => "mul_add",
            MathFn::Min => "min",
            MathFn::Max => "max",
            MathFn::Abs => "abs",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
        }
    }

    /// Whether integers may use it too.
    pub fn for_ints(self) -> bool {
        matches!(self, MathFn::Min | MathFn::Max | MathFn::Abs)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    FetchAdd,
    FetchMin,
    FetchMax,
    CompareExchange,
}

impl AtomicOp {
    pub fn from_name(name: &str) -> Option<AtomicOp> {
        Some(match name {
            "atomic_fetch_add" => AtomicOp::FetchAdd,
            "atomic_fetch_min" => AtomicOp::FetchMin,
            "atomic_fetch_max" => AtomicOp::FetchMax,
            "atomic_compare_exchange" => AtomicOp::CompareExchange,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    Sum,
    Min,
    Max,
}

impl Reduce {
    pub fn from_name(name: &str) -> Option<Reduce> {
        Some(match name {
            "group_sum" => Reduce::Sum,
            "group_min" => Reduce::Min,
            "group_max" => Reduce::Max,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Reduce::Sum => "sum",
            Reduce::Min => "min",
            Reduce::Max => "max",
        }
    }
}

/// Sub-group queries (`sub_group_local_id()`, ...): no argument, a `usize`. Sub-groups are
/// one-dimensional.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubGroupQuery {
    /// The work-item's lane in its sub-group (SYCL `sub_group::get_local_id`).
    LocalId,
    /// The size of this work-item's sub-group (the last one of a work-group may be smaller).
    LocalRange,
    /// The sub-group size of the launch (SYCL `get_max_local_range`).
    MaxLocalRange,
    /// The sub-group's index in its work-group.
    Id,
    /// The number of sub-groups in the work-group.
    Range,
}

impl SubGroupQuery {
    pub fn from_name(name: &str) -> Option<SubGroupQuery> {
        Some(match name {
            "sub_group_local_id" => SubGroupQuery::LocalId,
            "sub_group_local_range" => SubGroupQuery::LocalRange,
            "sub_group_max_local_range" => SubGroupQuery::MaxLocalRange,
            "sub_group_id" => SubGroupQuery::Id,
            "sub_group_range" => SubGroupQuery::Range,
            _ => return None,
        })
    }

    /// The same for every work-item of a work-group.
    pub fn is_uniform(self) -> bool {
        matches!(self, SubGroupQuery::MaxLocalRange | SubGroupQuery::Range)
    }
}

/// Sub-group collectives: every work-item of the sub-group takes part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubGroupOp {
    /// `sub_group_broadcast(x, lane)`: `x` of `lane` (the same in the whole work-group).
    Broadcast,
    /// `sub_group_shuffle(x, lane)`: `x` of any lane (SYCL `select_from_group`).
    Shuffle,
    /// `sub_group_shift_left(x, delta)`: `x` of lane `id + delta`.
    ShiftLeft,
    /// `sub_group_shift_right(x, delta)`: `x` of lane `id - delta`.
    ShiftRight,
    /// `sub_group_shuffle_xor(x, mask)`: `x` of lane `id ^ mask` (SYCL `permute_group_by_xor`).
    ShuffleXor,
    /// `sub_group_sum(x)` (`min`, `max`).
    Reduce(Reduce),
}

impl SubGroupOp {
    pub fn from_name(name: &str) -> Option<SubGroupOp> {
        Some(match name {
            "sub_group_broadcast" => SubGroupOp::Broadcast,
            "sub_group_shuffle" => SubGroupOp::Shuffle,
            "sub_group_shift_left" => SubGroupOp::ShiftLeft,
            "sub_group_shift_right" => SubGroupOp::ShiftRight,
            "sub_group_shuffle_xor" => SubGroupOp::ShuffleXor,
            "sub_group_sum" => SubGroupOp::Reduce(Reduce::Sum),
            "sub_group_min" => SubGroupOp::Reduce(Reduce::Min),
            "sub_group_max" => SubGroupOp::Reduce(Reduce::Max),
            _ => return None,
        })
    }

    /// The prelude's name for it (`sycl_sg_<name>_<type>`).
    pub fn name(self) -> &'static str {
        match self {
            SubGroupOp::Broadcast => "broadcast",
            SubGroupOp::Shuffle => "shuffle",
            SubGroupOp::ShiftLeft => "shift_left",
            SubGroupOp::ShiftRight => "shift_right",
            SubGroupOp::ShuffleXor => "shuffle_xor",
            SubGroupOp::Reduce(r) => r.name(),
        }
    }

    /// Whether it takes a lane (or delta, or mask) after the value.
    pub fn takes_lane(self) -> bool {
        !matches!(self, SubGroupOp::Reduce(_))
    }
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
    pub name: syn::Ident,
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
