//! The kernel language as parsed: the shared IR's types (`sycl-kernel-ir`) at the macro's own
//! [`Parsed`] stage, whose nodes carry source spans, helper paths and type variables
//! ([`Types`]: literals' types are inferred as Rust infers them). `encode.rs` maps a checked
//! function to the [`Resolved`](sycl_kernel_ir::Resolved) stage, with resolved types and the
//! bounds analysis' results, which is what every back end reads.

use proc_macro2::Span;
use sycl_kernel_ir as kir;

pub use sycl_kernel_ir::Param as ParamKind;
pub use sycl_kernel_ir::Scalar as Ty;
pub use sycl_kernel_ir::{
    Array, AtomicOp, Base, BinOp, Collective, Failure, Field, FieldItem, GroupOp, MathFn,
    MemoryOrder, MemoryScope, Query, Reduce, SubGroupOp, SubGroupQuery, UnOp,
};

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

/// The macro's stage of the IR: what it knows while it parses and checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Parsed;

impl kir::Stage for Parsed {
    /// A type variable of [`Types`].
    type Ty = TyId;
    /// The literal as written.
    type Lit = Lit;
    /// The helper's path as written.
    type Callee = syn::Path;
    /// Whether the source checks the access (`false`: `get_unchecked` inside `unsafe`).
    type Access = bool;
    /// (The bounds analysis answers when the function is encoded.)
    type Fact = ();
    type Flag = ();
    /// The source span.
    type Src = At;
    /// Its name and mutability.
    type LocalInfo = LocalInfo;
}

/// The macro's stage once the bounds analysis has answered: the resolved IR's types, literal
/// bits, checks and facts, with what the native CPU form still needs of the source (spans,
/// helper paths, local names, which accesses the source leaves unchecked). `encode.rs` makes
/// it from [`Parsed`]; the CPU form reads it; the words the runtime reads are its
/// [`Resolved`](kir::Resolved) image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Checked;

impl kir::Stage for Checked {
    type Ty = Ty;
    type Lit = u64;
    /// The helper's path, and the types it is called with (which instance of a generic
    /// helper the call takes).
    type Callee = (syn::Path, CallKey);
    type Access = AccessCheck;
    type Fact = kir::Check;
    type Flag = bool;
    type Src = At;
    type LocalInfo = LocalInfo;
}

/// The types a helper is called with: each argument's (`true`: a slice of it), then the
/// result's. A generic helper has an instance per key
/// (`KernelFn<fn(&'static [f32], f32) -> f32>`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallKey {
    pub args: Vec<(Ty, bool)>,
    pub ret: Ty,
}

impl CallKey {
    /// The key as the Rust type `KernelFn` is implemented for.
    pub fn type_tokens(&self) -> proc_macro2::TokenStream {
        let args = self.args.iter().map(|(t, slice)| {
            let t = crate::emit_rust::ty_tokens(*t);
            if *slice {
                quote::quote!(&'static [#t])
            } else {
                t
            }
        });
        let ret = crate::emit_rust::ty_tokens(self.ret);
        quote::quote!(fn(#(#args),*) -> #ret)
    }
}

/// An access's check, and whether the source itself leaves it unchecked (`get_unchecked`
/// inside the author's `unsafe`: then `check` is `Proved`, and the CPU form attributes the
/// unchecked access to the author's block).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessCheck {
    pub check: kir::Check,
    pub unchecked_in_source: bool,
}

pub type Expr = kir::Expr<Parsed>;
pub type ExprKind = kir::ExprKind<Parsed>;
pub type Stmt = kir::Stmt<Parsed>;
pub type StmtKind = kir::StmtKind<Parsed>;
pub type For = kir::For<Parsed>;
pub type Step = kir::Step<Parsed>;
pub type Local = kir::Local<Parsed>;

/// A source span, which takes no part in comparing or hashing nodes.
#[derive(Clone, Copy, Debug)]
pub struct At(pub Span);

impl PartialEq for At {
    fn eq(&self, _: &At) -> bool {
        true
    }
}

impl Eq for At {}

impl std::hash::Hash for At {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

/// A local's name and mutability.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LocalInfo {
    pub name: String,
    /// Assigned after its `let` (declared `mut`, or the target of a lowered `if` value).
    pub mutable: bool,
    /// Declared `let mut`: the user may assign it.
    pub user_mut: bool,
}

/// A kernel or helper parameter.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
    /// A struct slice's element type (its name in scope).
    pub strukt: Option<String>,
}

/// A parameter of the kernel's signature and the IR parameters it is passed as.
#[derive(Clone, Debug)]
pub enum SigParam {
    /// A scalar or a slice: one IR parameter (its index).
    Plain(usize),
    /// A struct by value: passed as the next IR scalar parameters, one per scalar (in field
    /// order, arrays item by item).
    Struct {
        def: std::rc::Rc<crate::structs::StructDef>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Lit {
    /// The zero of its type (`false`, `0`, `0.0`): the placeholder value of a lowered `if`.
    Zero,
    Int(u128),
    /// The literal's digits (no suffix), parsed at its final type by each emitter: parsing
    /// once as f64 and rounding to f32 could round twice.
    Float(String),
    Bool(bool),
}

/// The header of `for var in start..end` (`..=`, `.step_by(step)`), before the analysis.
pub fn for_header(
    var: usize,
    start: Expr,
    end: Expr,
    inclusive: bool,
    step: Option<Expr>,
) -> Box<For> {
    Box::new(kir::For {
        var,
        start,
        end,
        inclusive,
        step,
        counts_below_half: (),
        start_below_half: (),
        counts_in_u32: (),
        counts_in_u64: (),
        counts_in_i32: (),
        start_per_item: (),
    })
}

/// A parsed kernel or helper.
pub struct Function {
    pub params: Vec<Param>,
    /// The signature's parameters, in order, as IR parameters.
    pub signature: Vec<SigParam>,
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
