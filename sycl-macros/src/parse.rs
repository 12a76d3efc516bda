//! From `syn` to the kernel language ([`crate::ir`]): checks that a function stays inside the
//! subset (anything else is a compile error at its span) and infers every type, as Rust does
//! for the subset (unsuffixed literals take their type from their use, then default to `i32`
//! and `f64`).

use std::collections::HashMap;
use std::rc::Rc;

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Error, Result};

use crate::ir::*;
use crate::structs::{Known, StructDef};

mod fields;

use fields::StructValue;

/// What a function is being parsed as.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Kernel,
    Helper,
}

struct Parser {
    role: Role,
    params: Vec<Param>,
    param_ty: Vec<TyId>,
    locals: Vec<Local>,
    types: Types,
    scopes: Vec<HashMap<String, Binding>>,
    /// Inside `unsafe { .. }`: `get_unchecked` is allowed.
    unsafe_depth: usize,
    /// Loops enclosing the current statement.
    loop_depth: usize,
    ret: Option<TyId>,
    /// The const generic parameters' types.
    consts: Vec<Ty>,
    /// The kernel structs the kernel may name, by name.
    structs: HashMap<String, Rc<StructDef>>,
    /// Struct values (locals and by-value parameters).
    struct_values: Vec<StructValue>,
}

#[derive(Clone, Copy)]
enum Binding {
    Param(usize),
    Local(usize),
    /// A const generic parameter.
    Const(usize),
    /// A struct value (its index in `struct_values`).
    Struct(usize),
}

/// A kernel's const generic parameters (`const TILE: usize`), in order: their names and
/// types (`usize`, `u32`, `i32`, `u64` or `i64`).
pub fn const_params(g: &syn::Generics) -> Result<Vec<(String, Ty)>> {
    let mut out = Vec::new();
    for p in &g.params {
        match p {
            syn::GenericParam::Const(c) => {
                let ty = scalar_ty(&c.ty)
                    .filter(|t| matches!(t, Ty::Usize | Ty::U32 | Ty::I32 | Ty::U64 | Ty::I64))
                    .ok_or_else(|| {
                        err(
                            c.ty.span(),
                            "a kernel's const parameter is a `usize`, `u32`, `i32`, `u64` or `i64`",
                        )
                    })?;
                if c.default.is_some() {
                    return Err(err(c.span(), "a kernel's const parameter has no default"));
                }
                out.push((c.ident.to_string(), ty));
            }
            other => {
                return Err(err(
                    other.span(),
                    "kernel helpers cannot be generic, and a kernel's type parameters are bounded by `sycl::Float`, `sycl::Int` or `sycl::Scalar`",
                ))
            }
        }
    }
    if out.len() > sycl_kernel_ir::wire::MAX_CONST_PARAMS {
        return Err(err(
            g.span(),
            format!(
                "at most {} const parameters",
                sycl_kernel_ir::wire::MAX_CONST_PARAMS
            ),
        ));
    }
    Ok(out)
}

fn err(span: Span, msg: impl std::fmt::Display) -> Error {
    Error::new(span, msg)
}

/// Where an assignment stores (or, read, what a field access reads), before it becomes a
/// statement.
enum Place {
    Local(usize),
    /// A by-value struct parameter's field: read only.
    Param(usize),
    Elem {
        base: Base,
        index: Expr,
        /// `false`: `get_unchecked_mut` inside `unsafe`.
        checked: bool,
        /// The field of a struct slice's element.
        field: Option<Box<Field<Parsed>>>,
    },
}

impl Place {
    /// The place read as a value of type `ty`.
    fn read(self, ty: TyId, span: Span) -> Expr {
        let kind = match self {
            Place::Local(l) => ExprKind::Local(l),
            Place::Param(i) => ExprKind::Param(i),
            Place::Elem {
                base,
                index,
                checked,
                field,
            } => ExprKind::Load {
                base,
                check: checked,
                index_fits_i32: (),
                index: Box::new(index),
                field,
            },
        };
        Expr {
            kind,
            ty,
            src: At(span),
        }
    }
}

/// `place op= value;` as a statement.
fn assign(place: Place, op: Option<BinOp>, value: Expr) -> StmtKind {
    match place {
        Place::Local(l) => StmtKind::AssignLocal(l, op, value),
        Place::Param(_) => unreachable!("parameters are refused as places"),
        Place::Elem {
            base,
            index,
            checked,
            field,
        } => StmtKind::Store {
            base,
            check: checked,
            index_fits_i32: (),
            op,
            index,
            value,
            field,
        },
    }
}

/// The kernel language in a sentence, for error messages.
const SUBSET: &str = "see the kernel language in spec/kernels.md";

pub fn scalar_ty(ty: &syn::Type) -> Option<Ty> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => half_path(&p.path).or_else(|| {
            let seg = p.path.segments.last()?;
            if p.path.segments.len() == 1 && seg.arguments.is_none() {
                Ty::from_name(&seg.ident.to_string()).filter(|t| !t.is_half())
            } else {
                None
            }
        }),
        syn::Type::Paren(p) => scalar_ty(&p.elem),
        _ => None,
    }
}

/// `f16` / `bf16`, bare or as `half::f16`, `sycl::half::bf16`: the `half` crate's types.
fn half_path(path: &syn::Path) -> Option<Ty> {
    let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    if path.segments.iter().any(|s| !s.arguments.is_none()) {
        return None;
    }
    let t = Ty::from_name(segs.last()?).filter(|t| t.is_half())?;
    match &segs[..segs.len() - 1] {
        [] => Some(t),
        [.., h] if h == "half" => Some(t),
        _ => None,
    }
}

/// Parses `f` as a kernel or a helper; `structs`: the kernel structs it may name.
pub fn function(f: &syn::ItemFn, role: Role, structs: &Known) -> Result<Function> {
    let sig = &f.sig;
    if let Some(w) = &sig.generics.where_clause {
        return Err(err(w.span(), "kernels take no `where` clause"));
    }
    let consts = const_params(&sig.generics)?;
    if role == Role::Helper && !consts.is_empty() {
        return Err(err(sig.generics.span(), "kernel helpers cannot be generic"));
    }
    if let Some(t) = &sig.asyncness {
        return Err(err(t.span(), "kernels cannot be async"));
    }
    if let Some(t) = &sig.unsafety {
        return Err(err(
            t.span(),
            "kernels cannot be `unsafe fn`: use `unsafe { .. }` blocks for unchecked indexing",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(err(v.span(), "kernels cannot be variadic"));
    }
    let mut p = Parser {
        role,
        params: Vec::new(),
        param_ty: Vec::new(),
        locals: Vec::new(),
        types: Types::default(),
        scopes: vec![HashMap::new()],
        unsafe_depth: 0,
        loop_depth: 0,
        ret: None,
        consts: consts.iter().map(|(_, t)| *t).collect(),
        structs: structs
            .iter()
            .map(|(k, v)| (k.clone(), Rc::new(v.clone())))
            .collect(),
        struct_values: Vec::new(),
    };
    let mut signature = Vec::new();
    let mut prologue = Vec::new();
    for (i, (name, _)) in consts.iter().enumerate() {
        p.scopes[0].insert(name.clone(), Binding::Const(i));
    }
    for input in &sig.inputs {
        let syn::FnArg::Typed(pt) = input else {
            return Err(err(input.span(), "kernels take no `self`"));
        };
        let name = match &*pt.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                if pi.mutability.is_some() {
                    return Err(err(
                        pi.span(),
                        "kernel parameters are immutable: copy into a `let mut` local",
                    ));
                }
                pi.ident.to_string()
            }
            other => {
                return Err(err(
                    other.span(),
                    "a kernel parameter is a plain name (no patterns)",
                ))
            }
        };
        if p.scopes[0].contains_key(&name) {
            return Err(err(pt.pat.span(), "parameter names must be distinct"));
        }
        // (Helpers are translated without struct layouts.)
        let named = match &*pt.ty {
            syn::Type::Reference(r) => match &*r.elem {
                syn::Type::Slice(s) => &*s.elem,
                other => other,
            },
            other => other,
        };
        if role == Role::Helper && scalar_ty(named).is_none() && struct_name(named).is_some() {
            return Err(err(
                named.span(),
                "kernel helpers take no structs: pass the fields the helper needs",
            ));
        }
        // A struct by value: a scalar parameter per scalar.
        if let Some(def) = struct_name(&pt.ty).and_then(|n| p.structs.get(&n).cloned()) {
            prologue.extend(p.struct_value_param(&name, def.clone(), pt.span()));
            signature.push(SigParam::Struct { def });
            continue;
        }
        let mut strukt = None;
        let kind = match &*pt.ty {
            syn::Type::Reference(r) => {
                if r.lifetime.is_some() {
                    return Err(err(r.span(), "kernel slices take no lifetime"));
                }
                let syn::Type::Slice(s) = &*r.elem else {
                    return Err(err(
                        r.span(),
                        "a reference parameter must be a slice: `&[T]` (read) or `&mut [T]` (written)",
                    ));
                };
                if let Some((kind, n)) = p.struct_slice_param(&s.elem, r.mutability.is_some())? {
                    strukt = Some(n);
                    kind
                } else {
                let elem = scalar_ty(&s.elem)
                    .filter(|t| t.is_element() && *t != Ty::Usize)
                    .ok_or_else(|| {
                        err(
                            s.elem.span(),
                            "slice elements are i32, u32, i64, u64, f32, f64, f16 or bf16 (for indices, `u64` and `as usize`)",
                        )
                    })?;
                ParamKind::Slice {
                    elem,
                    mutable: r.mutability.is_some(),
                }
                }
            }
            other => ParamKind::Scalar(scalar_ty(other).ok_or_else(|| {
                err(
                    other.span(),
                    "kernel parameters are bool, i32, u32, i64, u64, usize, f32, f64, structs that derive `sycl::KernelType`, or slices of them",
                )
            })?),
        };
        let ty = match kind {
            ParamKind::Scalar(t) | ParamKind::Slice { elem: t, .. } => p.types.known(t),
            // (Read a field at a time: the parameter itself has no scalar type.)
            ParamKind::Structs { .. } => p.types.unknown(),
        };
        signature.push(SigParam::Plain(p.params.len()));
        p.scopes[0].insert(name.clone(), Binding::Param(p.params.len()));
        p.params.push(Param { name, kind, strukt });
        p.param_ty.push(ty);
    }
    let ret = match (&sig.output, role) {
        (syn::ReturnType::Default, Role::Kernel) => None,
        (syn::ReturnType::Type(_, t), Role::Kernel) => {
            return Err(err(
                t.span(),
                "kernels return nothing (write results into a `&mut [T]`)",
            ))
        }
        (syn::ReturnType::Default, Role::Helper) => {
            return Err(err(sig.span(), "a kernel helper returns a scalar"))
        }
        (syn::ReturnType::Type(_, t), Role::Helper) => {
            Some(scalar_ty(t).ok_or_else(|| err(t.span(), "a kernel helper returns a scalar"))?)
        }
    };
    p.ret = ret.map(|t| p.types.known(t));
    let mut body = prologue;
    body.extend(p.block_body(&f.block, role == Role::Helper)?);
    let function = Function {
        params: p.params,
        signature,
        ret,
        locals: p.locals,
        body,
        types: p.types,
    };
    check_resolved(&function)?;
    Ok(function)
}

/// The single name a type is (`Particle`), if it is one.
fn struct_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}

/// Every type must be decided once the whole function is read (a helper call whose result no
/// use decides is the only way not to).
fn check_resolved(f: &Function) -> Result<()> {
    let mut unknown = None;
    sycl_kernel_ir::ir::visit_exprs(&f.body, &mut |e| {
        if unknown.is_none() && f.types.resolve(e.ty).is_none() {
            unknown = Some(e.src.0);
        }
    });
    if let Some(span) = unknown {
        return Err(err(
            span,
            "the type of this helper call's result is not known here: annotate it (`let x: f32 = ..`)",
        ));
    }
    for l in &f.locals {
        if l.array.is_some() && f.types.resolve(l.ty) == Some(Ty::Bool) {
            return Err(err(
                Span::call_site(),
                format!(
                    "`{}` is an array of `bool`: arrays hold numbers (use `u32` for flags)",
                    l.info.name
                ),
            ));
        }
        if f.types.resolve(l.ty).is_none() {
            return Err(err(
                Span::call_site(),
                format!("the type of `{}` is not known: annotate it", l.info.name),
            ));
        }
    }
    Ok(())
}

/// The last segment of a single-segment-or-`sycl::..`-path call, if any.
fn call_name(path: &syn::Path) -> String {
    path.segments
        .last()
        .map(|s| s.ident.to_string())
        .unwrap_or_default()
}

/// Whether a path names one of the kernel language's functions: a bare name, or a path
/// through `sycl` / `kernel` (`sycl::kernel::barrier`).
fn is_builtin_path(path: &syn::Path) -> bool {
    let n = path.segments.len();
    n == 1
        || path
            .segments
            .iter()
            .take(n - 1)
            .all(|s| s.ident == "sycl" || s.ident == "kernel")
}

impl Parser {
    fn unify(&mut self, a: TyId, b: TyId, span: Span, what: &str) -> Result<()> {
        self.types
            .unify(a, b)
            .map_err(|(x, y)| err(span, format!("mismatched types in {what}: {x} and {y}")))
    }

    fn expect_ty(&mut self, e: &Expr, ty: Ty, what: &str) -> Result<()> {
        let t = self.types.known(ty);
        self.unify(e.ty, t, e.src.0, what)
    }

    fn lookup(&self, name: &str) -> Option<Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn new_local(&mut self, name: String, ty: TyId, mutable: bool, array: Option<Array>) -> usize {
        self.locals.push(Local {
            ty,
            array,
            info: LocalInfo {
                name: name.clone(),
                mutable,
                user_mut: mutable,
            },
        });
        let id = self.locals.len() - 1;
        self.scopes
            .last_mut()
            .expect("a scope")
            .insert(name, Binding::Local(id));
        id
    }

    /// A block's statements; `tail_returns`: its tail expression is the function's value.
    fn block_body(&mut self, block: &syn::Block, tail_returns: bool) -> Result<Vec<Stmt>> {
        self.scopes.push(HashMap::new());
        let out = self.stmts_of(&block.stmts, tail_returns);
        self.scopes.pop();
        out
    }

    /// Statements in the current scope (none of them a returned tail).
    fn block_stmts(&mut self, stmts: &[syn::Stmt]) -> Result<Vec<Stmt>> {
        self.stmts_of(stmts, false)
    }

    fn stmts_of(&mut self, stmts: &[syn::Stmt], tail_returns: bool) -> Result<Vec<Stmt>> {
        let mut out = Vec::new();
        let n = stmts.len();
        for (i, s) in stmts.iter().enumerate() {
            let last = i + 1 == n;
            match s {
                syn::Stmt::Local(l) => out.extend(self.local(l)?),
                syn::Stmt::Expr(e, semi) => {
                    if last
                        && semi.is_none()
                        && tail_returns
                        && (!is_block_like(e) || is_value_if(e))
                    {
                        let v = self.expr(e)?;
                        let ret = self.ret.expect("helpers return a value");
                        self.unify(v.ty, ret, v.src.0, "the returned value")?;
                        out.push(Stmt {
                            src: At(e.span()),
                            kind: StmtKind::Return(Some(v)),
                        });
                    } else {
                        out.extend(self.stmt_expr(e)?);
                    }
                }
                syn::Stmt::Item(item) => {
                    return Err(err(
                        item.span(),
                        "items (fn, struct, use, ..) cannot be declared inside a kernel",
                    ))
                }
                syn::Stmt::Macro(m) => {
                    return Err(err(
                        m.span(),
                        format!("macros cannot be used inside a kernel ({SUBSET})"),
                    ))
                }
            }
        }
        Ok(out)
    }

    fn local(&mut self, l: &syn::Local) -> Result<Vec<Stmt>> {
        let (pat, annotated) = match &l.pat {
            syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            other => (other, None),
        };
        let syn::Pat::Ident(pi) = pat else {
            return Err(err(
                pat.span(),
                "`let` binds one name (no tuple or struct patterns)",
            ));
        };
        if pi.by_ref.is_some() || pi.subpat.is_some() {
            return Err(err(pi.span(), "`let` binds one name by value"));
        }
        let name = pi.ident.to_string();
        let Some(init) = &l.init else {
            return Err(err(l.span(), "a `let` needs an initial value"));
        };
        if init.diverge.is_some() {
            return Err(err(l.span(), "`let .. else` is not supported in kernels"));
        }
        // `let tile = local_array::<f32, 256>();`
        if let Some((elem, len, len_param)) = local_array_call(&init.expr, &|e| self.array_len(e))?
        {
            if self.role == Role::Helper {
                return Err(err(
                    init.expr.span(),
                    "work-group local memory belongs to kernels, not helpers",
                ));
            }
            if self.scopes.len() != 2 {
                return Err(err(
                    init.expr.span(),
                    "work-group local arrays are declared at the top of the kernel body",
                ));
            }
            let ty = self.types.known(elem);
            let array = Array {
                len_param,
                ..Array::work_group(len as u32)
            };
            self.new_local(name, ty, false, Some(array));
            return Ok(Vec::new());
        }
        // `let q = p[i];`, `let q = Particle { .. };`: a struct value.
        let annotated_struct = annotated
            .and_then(struct_name)
            .is_some_and(|n| self.structs.contains_key(&n));
        if annotated_struct || self.is_struct_expr(&init.expr) {
            return self.struct_let(name, pi.mutability.is_some(), annotated, &init.expr);
        }
        // `let a = [x, y, z];`: a private array of the values.
        if let syn::Expr::Array(a) = strip_paren(&init.expr) {
            return self.array_list(name, pi.mutability.is_some(), annotated, a, l.span());
        }
        // `let mut acc = [0.0f32; 8];`: a private array.
        if let syn::Expr::Repeat(r) = strip_paren(&init.expr) {
            let mutable = pi.mutability.is_some();
            return self.private_array(name, mutable, annotated, r, l.span());
        }
        if let Some(syn::Type::Array(a)) = annotated {
            return Err(err(
                a.span(),
                "a private array is declared with its value for every element: `let mut a = [0.0f32; 8];`",
            ));
        }
        let annotated = annotated
            .map(|t| {
                scalar_ty(t).ok_or_else(|| {
                    err(
                        t.span(),
                        "locals are bool, i32, u32, i64, u64, usize, f32 or f64",
                    )
                })
            })
            .transpose()?;
        if let syn::Expr::If(i) = strip_paren(&init.expr) {
            if !is_value_if(&init.expr) {
                return self.let_if(name, pi.mutability.is_some(), annotated, i, l.span());
            }
        }
        let value = self.expr(&init.expr)?;
        if let Some(ty) = annotated {
            self.expect_ty(&value, ty, "this `let`")?;
        }
        let id = self.new_local(name, value.ty, pi.mutability.is_some(), None);
        Ok(vec![Stmt {
            src: At(l.span()),
            kind: StmtKind::Let(id, value),
        }])
    }

    /// `let a = [x, y, z];`: a private array whose elements are the values (each evaluated
    /// once, in order, into temporaries; then the array filled from them).
    fn array_list(
        &mut self,
        name: String,
        mutable: bool,
        annotated: Option<&syn::Type>,
        a: &syn::ExprArray,
        span: Span,
    ) -> Result<Vec<Stmt>> {
        let max = sycl_kernel_ir::validate::MAX_PRIVATE_ARRAY as usize;
        let len = a.elems.len();
        if len == 0 || len > 64 {
            return Err(err(
                a.span(),
                format!("an array list holds 1 to 64 values (`[v; N]` makes up to {max})"),
            ));
        }
        let mut out = Vec::new();
        let mut temps = Vec::new();
        let mut ty = None;
        for x in &a.elems {
            let v = self.expr(x)?;
            if let Some(t) = ty {
                self.unify(v.ty, t, x.span(), "this array's elements")?;
            }
            ty = Some(v.ty);
            let (t, st) = self.temp(v, x.span());
            out.push(st);
            temps.push(t);
        }
        let ty = ty.expect("one element at least");
        if let Some(t) = annotated {
            let syn::Type::Array(at) = t else {
                return Err(err(
                    t.span(),
                    "this `let` is an array: annotate it `[T; N]`",
                ));
            };
            if self.array_len(&at.len) != Some((len, None)) {
                return Err(err(
                    at.len.span(),
                    "the annotated length differs from the value's",
                ));
            }
            let elem = scalar_ty(&at.elem).ok_or_else(|| {
                err(
                    at.elem.span(),
                    "array elements are i32, u32, i64, u64, usize, f32, f64, f16 or bf16",
                )
            })?;
            let e = self.types.known(elem);
            self.unify(ty, e, a.span(), "this array's elements")?;
        }
        if self.types.get(ty) == Some(Ty::Bool) {
            return Err(err(a.span(), "arrays hold numbers (use `u32` for flags)"));
        }
        let id = self.new_local(name, ty, mutable, Some(Array::private(len as u32)));
        // (Filled by stores after its `let`.)
        self.locals[id].info.mutable = true;
        let gets: Vec<fields::Get> = temps.iter().map(|t| fields::Get::Temp(*t)).collect();
        out.extend(self.fill_array(id, &gets, span));
        Ok(out)
    }

    /// `let a = [v; N];` (`annotated`: the `let`'s type, `[T; N]` if given): a private array,
    /// every element `v` (evaluated once).
    fn private_array(
        &mut self,
        name: String,
        mutable: bool,
        annotated: Option<&syn::Type>,
        r: &syn::ExprRepeat,
        span: Span,
    ) -> Result<Vec<Stmt>> {
        let usage = "a private array is `[v; N]`, N a literal length (or a product or sum of literals) or a `usize` const parameter";
        let (len, len_param) = self
            .array_len(&r.len)
            .ok_or_else(|| err(r.len.span(), usage))?;
        let max = sycl_kernel_ir::validate::MAX_PRIVATE_ARRAY as usize;
        if len == 0 || len > max {
            return Err(err(
                r.len.span(),
                format!("a private array holds 1 to {max} elements (use `local_array` or a slice for more)"),
            ));
        }
        let value = self.expr(&r.expr)?;
        if let Some(t) = annotated {
            let elem = match t {
                syn::Type::Array(a) => {
                    if self.array_len(&a.len) != Some((len, len_param)) {
                        return Err(err(
                            a.len.span(),
                            "the annotated length differs from the value's",
                        ));
                    }
                    scalar_ty(&a.elem).ok_or_else(|| {
                        err(
                            a.elem.span(),
                            "array elements are i32, u32, i64, u64, usize, f32, f64, f16 or bf16",
                        )
                    })?
                }
                other => {
                    return Err(err(
                        other.span(),
                        "this `let` is an array: annotate it `[T; N]`",
                    ))
                }
            };
            self.expect_ty(&value, elem, "this array's elements")?;
        }
        if self.types.get(value.ty) == Some(Ty::Bool) {
            return Err(err(
                r.expr.span(),
                "arrays hold numbers (use `u32` for flags)",
            ));
        }
        let array = Array {
            len_param,
            ..Array::private(len as u32)
        };
        let id = self.new_local(name, value.ty, mutable, Some(array));
        Ok(vec![Stmt {
            src: At(span),
            kind: StmtKind::Let(id, value),
        }])
    }

    /// `let v = if c { stmts; a } else { stmts; b };` (branches with statements): C has no
    /// block values, so `v` starts at zero and each branch assigns its value to it.
    fn let_if(
        &mut self,
        name: String,
        user_mut: bool,
        annotated: Option<Ty>,
        i: &syn::ExprIf,
        span: Span,
    ) -> Result<Vec<Stmt>> {
        let ty = match annotated {
            Some(t) => self.types.known(t),
            None => self.types.unknown(),
        };
        // The branches see the scope before the `let` (as in Rust): the name binds after.
        self.locals.push(Local {
            ty,
            array: None,
            info: LocalInfo {
                name: name.clone(),
                mutable: true,
                user_mut,
            },
        });
        let id = self.locals.len() - 1;
        let assign = self.if_value(i, id, ty)?;
        self.scopes
            .last_mut()
            .expect("a scope")
            .insert(name, Binding::Local(id));
        Ok(vec![
            Stmt {
                src: At(span),
                kind: StmtKind::Let(
                    id,
                    Expr {
                        kind: ExprKind::Lit(Lit::Zero),
                        ty,
                        src: At(span),
                    },
                ),
            },
            assign,
        ])
    }

    /// An `if` whose branches end in values, as statements assigning them to `target`.
    fn if_value(&mut self, i: &syn::ExprIf, target: usize, ty: TyId) -> Result<Stmt> {
        if let syn::Expr::Let(l) = &*i.cond {
            return Err(err(l.span(), "`if let` is not supported in kernels"));
        }
        let cond = self.expr(&i.cond)?;
        self.expect_ty(&cond, Ty::Bool, "an `if` condition")?;
        let then = self.value_block(&i.then_branch, target, ty)?;
        let els = match &i.else_branch {
            None => return Err(err(i.span(), "an `if` used as a value needs an `else`")),
            Some((_, e)) => match &**e {
                syn::Expr::If(inner) => vec![self.if_value(inner, target, ty)?],
                syn::Expr::Block(b) => self.value_block(&b.block, target, ty)?,
                other => return Err(err(other.span(), "unexpected `else` branch")),
            },
        };
        Ok(Stmt {
            src: At(i.span()),
            kind: StmtKind::If(cond, then, els),
        })
    }

    /// A block ending in a value: its statements, then the value assigned to `target`.
    fn value_block(&mut self, block: &syn::Block, target: usize, ty: TyId) -> Result<Vec<Stmt>> {
        let Some((syn::Stmt::Expr(tail, None), init)) = block.stmts.split_last() else {
            return Err(err(
                block.span(),
                "each branch of an `if` used as a value ends in a value (no `;` after it)",
            ));
        };
        self.scopes.push(HashMap::new());
        let body = self.block_stmts(init);
        let result = body.and_then(|mut out| {
            if let syn::Expr::If(inner) = strip_paren(tail) {
                if !is_value_if(tail) {
                    out.push(self.if_value(inner, target, ty)?);
                    return Ok(out);
                }
            }
            let v = self.expr(tail)?;
            self.unify(v.ty, ty, v.src.0, "the branches of this `if`")?;
            out.push(Stmt {
                src: At(v.src.0),
                kind: StmtKind::AssignLocal(target, None, v),
            });
            Ok(out)
        });
        self.scopes.pop();
        result
    }

    /// An expression in statement position: control flow, assignments, calls.
    fn stmt_expr(&mut self, e: &syn::Expr) -> Result<Vec<Stmt>> {
        let span = e.span();
        let one = |kind| {
            Ok(vec![Stmt {
                kind,
                src: At(span),
            }])
        };
        match e {
            syn::Expr::Assign(a) => {
                if let Some(stmts) = self.struct_assign(&a.left, &a.right)? {
                    return Ok(stmts);
                }
                let value = self.expr(&a.right)?;
                let (place, ty) = self.place(&a.left)?;
                self.unify(value.ty, ty, a.span(), "this assignment")?;
                one(assign(place, None, value))
            }
            syn::Expr::Binary(b) if compound_op(&b.op).is_some() => {
                let op = compound_op(&b.op).expect("checked");
                let value = self.expr(&b.right)?;
                let (place, ty) = self.place(&b.left)?;
                self.check_binary(op, ty, value.ty, b.span())?;
                if !matches!(op, BinOp::Shl | BinOp::Shr) {
                    self.unify(value.ty, ty, b.span(), "this compound assignment")?;
                }
                one(assign(place, Some(op), value))
            }
            syn::Expr::If(i) => {
                let (cond, then, els) = self.if_parts(i)?;
                one(StmtKind::If(cond, then, els))
            }
            syn::Expr::While(w) => {
                if w.label.is_some() {
                    return Err(err(w.span(), "loop labels are not supported in kernels"));
                }
                let cond = self.expr(&w.cond)?;
                self.expect_ty(&cond, Ty::Bool, "a `while` condition")?;
                self.loop_depth += 1;
                let body = self.block_body(&w.body, false);
                self.loop_depth -= 1;
                one(StmtKind::While(cond, body?))
            }
            syn::Expr::Loop(l) => {
                if l.label.is_some() {
                    return Err(err(l.span(), "loop labels are not supported in kernels"));
                }
                self.loop_depth += 1;
                let body = self.block_body(&l.body, false);
                self.loop_depth -= 1;
                one(StmtKind::Loop(body?))
            }
            syn::Expr::ForLoop(f) => self.for_loop(f),
            syn::Expr::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    return Err(err(b.span(), "`break` takes no label or value in kernels"));
                }
                if self.loop_depth == 0 {
                    return Err(err(b.span(), "`break` outside a loop"));
                }
                one(StmtKind::Break)
            }
            syn::Expr::Continue(c) => {
                if c.label.is_some() {
                    return Err(err(c.span(), "`continue` takes no label in kernels"));
                }
                if self.loop_depth == 0 {
                    return Err(err(c.span(), "`continue` outside a loop"));
                }
                one(StmtKind::Continue)
            }
            syn::Expr::Return(r) => {
                let value = match (&r.expr, self.ret) {
                    (None, None) => None,
                    (Some(v), Some(ret)) => {
                        let v = self.expr(v)?;
                        self.unify(v.ty, ret, v.src.0, "the returned value")?;
                        Some(v)
                    }
                    (Some(v), None) => return Err(err(v.span(), "kernels return nothing")),
                    (None, Some(_)) => {
                        return Err(err(r.span(), "a kernel helper returns a value"))
                    }
                };
                one(StmtKind::Return(value))
            }
            syn::Expr::Block(b) => {
                if b.label.is_some() {
                    return Err(err(b.span(), "block labels are not supported in kernels"));
                }
                // A nested block: its statements, with their own scope.
                self.block_body(&b.block, false)
            }
            syn::Expr::Unsafe(u) => {
                self.unsafe_depth += 1;
                let body = self.block_body(&u.block, false);
                self.unsafe_depth -= 1;
                body
            }
            syn::Expr::Call(c) if is_builtin_path_call(c, "barrier") => {
                if !c.args.is_empty() {
                    return Err(err(c.span(), "`barrier()` takes no argument"));
                }
                if self.role == Role::Helper {
                    return Err(err(
                        c.span(),
                        "group barriers belong to kernels, not helpers",
                    ));
                }
                one(StmtKind::Barrier)
            }
            syn::Expr::Call(c) if is_builtin_path_call(c, "atomic_fence") => one(self.fence(c)?),
            syn::Expr::Call(c) if is_builtin_path_call(c, "kernel_fail") => {
                let usage =
                    "`kernel_fail(Failure::TimedOut);` or `kernel_fail(Failure::Mismatched);`";
                let [f] = c.args.iter().collect::<Vec<_>>()[..] else {
                    return Err(err(c.span(), usage));
                };
                if self.role == Role::Helper {
                    return Err(err(
                        c.span(),
                        "`kernel_fail` belongs to kernels, not helpers: return a value that says what failed",
                    ));
                }
                let failure = match enum_path(f) {
                    Some((t, v)) if t == "Failure" => Failure::from_name(&v),
                    _ => None,
                }
                .ok_or_else(|| err(f.span(), usage))?;
                // The work-item stops where it fails.
                Ok(vec![
                    Stmt {
                        kind: StmtKind::Fail(failure),
                        src: At(span),
                    },
                    Stmt {
                        kind: StmtKind::Return(None),
                        src: At(span),
                    },
                ])
            }
            syn::Expr::Call(c) if is_builtin_path_call(c, "atomic_store") => {
                one(StmtKind::Expr(self.atomic(AtomicOp::Store, c)?))
            }
            _ => {
                let value = self.expr(e)?;
                match value.kind {
                    ExprKind::Atomic { .. } | ExprKind::Call(..) => one(StmtKind::Expr(value)),
                    _ => Err(err(span, "this expression has no effect as a statement")),
                }
            }
        }
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Result<Vec<Stmt>> {
        if f.label.is_some() {
            return Err(err(f.span(), "loop labels are not supported in kernels"));
        }
        let syn::Pat::Ident(pi) = &*f.pat else {
            return Err(err(f.pat.span(), "a `for` loop binds one name"));
        };
        if pi.mutability.is_some() || pi.by_ref.is_some() {
            return Err(err(pi.span(), "a `for` loop variable is a plain name"));
        }
        // `a..b`, `a..=b`, or either `.step_by(s)`.
        let (range_expr, step) = match strip_paren(&f.expr) {
            syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                (strip_paren(&m.receiver), Some(&m.args[0]))
            }
            other => (other, None),
        };
        let range =
            match range_expr {
                syn::Expr::Range(r) => r,
                other => return Err(err(
                    other.span(),
                    "`for` runs over an integer range (`a..b`, `a..=b`, optionally `.step_by(s)`)",
                )),
            };
        let (Some(start), Some(end)) = (&range.start, &range.end) else {
            return Err(err(range.span(), "a kernel `for` range has both ends"));
        };
        let start = self.expr(start)?;
        let end = self.expr(end)?;
        self.unify(start.ty, end.ty, range.span(), "the range's ends")?;
        if !self.types.is_int(start.ty) {
            return Err(err(range.span(), "`for` ranges are over integers"));
        }
        let inclusive = matches!(range.limits, syn::RangeLimits::Closed(_));
        let step = match step {
            Some(s) => {
                let s = self.expr(s)?;
                self.expect_ty(&s, Ty::Usize, "a `step_by` (its step is a `usize`)")?;
                Some(s)
            }
            None => None,
        };
        self.scopes.push(HashMap::new());
        let var = self.new_local(pi.ident.to_string(), start.ty, false, None);
        self.loop_depth += 1;
        let body = self.block_body(&f.body, false);
        self.loop_depth -= 1;
        self.scopes.pop();
        Ok(vec![Stmt {
            src: At(f.span()),
            kind: StmtKind::For(for_header(var, start, end, inclusive, step), body?),
        }])
    }

    fn if_parts(&mut self, i: &syn::ExprIf) -> Result<(Expr, Vec<Stmt>, Vec<Stmt>)> {
        if let syn::Expr::Let(l) = &*i.cond {
            return Err(err(l.span(), "`if let` is not supported in kernels"));
        }
        let cond = self.expr(&i.cond)?;
        self.expect_ty(&cond, Ty::Bool, "an `if` condition")?;
        let then = self.block_body(&i.then_branch, false)?;
        let els = match &i.else_branch {
            None => Vec::new(),
            Some((_, e)) => match &**e {
                syn::Expr::If(inner) => {
                    let (c, t, e) = self.if_parts(inner)?;
                    vec![Stmt {
                        src: At(inner.span()),
                        kind: StmtKind::If(c, t, e),
                    }]
                }
                syn::Expr::Block(b) => self.block_body(&b.block, false)?,
                other => return Err(err(other.span(), "unexpected `else` branch")),
            },
        };
        Ok((cond, then, els))
    }

    /// The place an assignment writes, and its type.
    fn place(&mut self, e: &syn::Expr) -> Result<(Place, TyId)> {
        match strip_paren(e) {
            syn::Expr::Path(p) => {
                let name = p
                    .path
                    .get_ident()
                    .ok_or_else(|| err(p.span(), "assign to a local variable"))?
                    .to_string();
                match self.lookup(&name) {
                    Some(Binding::Local(id)) if self.locals[id].array.is_none() => {
                        if !self.locals[id].info.user_mut {
                            return Err(err(
                                p.span(),
                                format!("`{name}` is not `mut`: declare it with `let mut`"),
                            ));
                        }
                        Ok((Place::Local(id), self.locals[id].ty))
                    }
                    Some(Binding::Local(_)) => Err(err(
                        p.span(),
                        "a local array is assigned element by element",
                    )),
                    Some(Binding::Param(_)) => Err(err(
                        p.span(),
                        format!("parameter `{name}` is immutable: copy it into a `let mut` local"),
                    )),
                    Some(Binding::Const(_)) => {
                        Err(err(p.span(), format!("`{name}` is a const parameter")))
                    }
                    Some(Binding::Struct(_)) => Err(self.whole_struct_error(p.span())),
                    None => Err(err(
                        p.span(),
                        format!("cannot find `{name}` in this kernel"),
                    )),
                }
            }
            syn::Expr::Field(f) => self
                .field_access(&f.base, &f.member, None, true, f.span())?
                .ok_or_else(|| {
                    err(
                        f.span(),
                        "fields are of struct slices' elements (`p[i].x`) and struct locals",
                    )
                }),
            syn::Expr::Index(ix) => {
                if let syn::Expr::Field(f) = strip_paren(&ix.expr) {
                    if let Some(place) =
                        self.field_access(&f.base, &f.member, Some(&ix.index), true, ix.span())?
                    {
                        return Ok(place);
                    }
                }
                if let Some(place) =
                    self.array_element_item(&ix.expr, &ix.index, true, ix.span())?
                {
                    return Ok(place);
                }
                let (base, ty) = self.indexable(&ix.expr, true)?;
                let index = self.index_expr(&ix.index)?;
                Ok((
                    Place::Elem {
                        base,
                        index,
                        checked: true,
                        field: None,
                    },
                    ty,
                ))
            }
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => {
                let (base, index) = self.unchecked(&u.expr, true)?;
                let ty = self.base_ty(base);
                Ok((
                    Place::Elem {
                        base,
                        index,
                        checked: false,
                        field: None,
                    },
                    ty,
                ))
            }
            other => Err(err(
                other.span(),
                "assign to a `let mut` local or to an element (`x[i] = ..`)",
            )),
        }
    }

    /// An array length: a literal expression (`None` parameter), or a `usize` const
    /// parameter (its index, the length 1 standing for it until the runtime instantiates).
    fn array_len(&self, e: &syn::Expr) -> Option<(usize, Option<usize>)> {
        if let Some(n) = const_usize(e) {
            return Some((n, None));
        }
        let mut e = strip_paren(e);
        // `{ TILE }`, as Rust writes a const argument.
        if let syn::Expr::Block(b) = e {
            if let [syn::Stmt::Expr(inner, None)] = b.block.stmts.as_slice() {
                e = strip_paren(inner);
            }
        }
        let syn::Expr::Path(p) = e else { return None };
        match self.lookup(&p.path.get_ident()?.to_string())? {
            Binding::Const(i) if self.consts[i] == Ty::Usize => Some((1, Some(i))),
            _ => None,
        }
    }

    fn base_ty(&self, base: Base) -> TyId {
        match base {
            Base::Param(p) => self.param_ty[p],
            Base::Local(l) => self.locals[l].ty,
        }
    }

    /// A slice parameter or local array being indexed; `write`: for an assignment.
    fn indexable(&mut self, e: &syn::Expr, write: bool) -> Result<(Base, TyId)> {
        let syn::Expr::Path(p) = strip_paren(e) else {
            return Err(err(
                e.span(),
                "only slice parameters and local arrays can be indexed",
            ));
        };
        let name = p
            .path
            .get_ident()
            .ok_or_else(|| err(p.span(), "index a slice parameter or local array by name"))?
            .to_string();
        match self.lookup(&name) {
            Some(Binding::Param(i)) => match self.params[i].kind {
                ParamKind::Slice { mutable, .. } => {
                    if write && !mutable {
                        return Err(err(
                            p.span(),
                            format!("`{name}` is `&[T]`: declare it `&mut [T]` to write it"),
                        ));
                    }
                    Ok((Base::Param(i), self.param_ty[i]))
                }
                ParamKind::Structs { .. } => Err(err(
                    p.span(),
                    format!("`{name}` holds structs: read and write a field (`{name}[i].x`), or copy a whole one (`let q = {name}[i];`)"),
                )),
                ParamKind::Scalar(_) => Err(err(p.span(), format!("`{name}` is not a slice"))),
            },
            Some(Binding::Local(l)) if self.locals[l].array.is_some() => {
                if write && self.locals[l].is_private_array() && !self.locals[l].info.user_mut {
                    return Err(err(
                        p.span(),
                        format!("`{name}` is not `mut`: declare it with `let mut`"),
                    ));
                }
                Ok((Base::Local(l), self.locals[l].ty))
            }
            Some(Binding::Local(_) | Binding::Const(_) | Binding::Struct(_)) => {
                Err(err(p.span(), format!("`{name}` is not an array")))
            }
            None => Err(err(
                p.span(),
                format!("cannot find `{name}` in this kernel"),
            )),
        }
    }

    fn index_expr(&mut self, e: &syn::Expr) -> Result<Expr> {
        if let syn::Expr::Range(r) = strip_paren(e) {
            return Err(err(
                r.span(),
                "kernels index one element at a time (no sub-slices)",
            ));
        }
        let i = self.expr(e)?;
        self.expect_ty(&i, Ty::Usize, "an index (indices are `usize`)")?;
        Ok(i)
    }

    /// `x.get_unchecked(i)` / `x.get_unchecked_mut(i)` (the operand of `*`), inside `unsafe`.
    fn unchecked(&mut self, e: &syn::Expr, write: bool) -> Result<(Base, Expr)> {
        let syn::Expr::MethodCall(m) = strip_paren(e) else {
            return Err(err(
                e.span(),
                "`*` is only for `*x.get_unchecked(i)` and `*x.get_unchecked_mut(i)`",
            ));
        };
        let want = if write {
            "get_unchecked_mut"
        } else {
            "get_unchecked"
        };
        if m.method != want || m.args.len() != 1 {
            return Err(err(
                m.span(),
                format!("`*` is only for `*x.{want}(i)` here"),
            ));
        }
        if self.unsafe_depth == 0 {
            return Err(err(
                m.span(),
                format!("`{want}` skips the bounds check: it needs an `unsafe {{ .. }}` block"),
            ));
        }
        let (base, _) = self.indexable(&m.receiver, write)?;
        let index = self.index_expr(&m.args[0])?;
        Ok((base, index))
    }

    fn lit(&mut self, l: &syn::Lit) -> Result<Expr> {
        let span = l.span();
        let (kind, ty) = match l {
            syn::Lit::Int(i) => {
                let v: u128 = i
                    .base10_parse()
                    .map_err(|_| err(span, "integer literal out of range"))?;
                let ty = match i.suffix() {
                    "" => self.types.int_var(),
                    s => {
                        let t = Ty::from_name(s).filter(|t| t.is_numeric()).ok_or_else(|| {
                            err(
                                span,
                                format!("literal suffix `{s}` is not in the kernel language"),
                            )
                        })?;
                        self.types.known(t)
                    }
                };
                if self.types.is_float(ty) {
                    (ExprKind::Lit(Lit::Float(v.to_string())), ty)
                } else {
                    (ExprKind::Lit(Lit::Int(v)), ty)
                }
            }
            syn::Lit::Float(f) => {
                let v = f.base10_digits().to_owned();
                if v.parse::<f64>().map_or(true, |x| !x.is_finite()) {
                    return Err(err(span, "float literal out of range"));
                }
                let ty = match f.suffix() {
                    "" => self.types.float_var(),
                    "f32" => self.types.known(Ty::F32),
                    "f64" => self.types.known(Ty::F64),
                    s => {
                        return Err(err(
                            span,
                            format!("literal suffix `{s}` is not a float type"),
                        ))
                    }
                };
                (ExprKind::Lit(Lit::Float(v)), ty)
            }
            syn::Lit::Bool(b) => (
                ExprKind::Lit(Lit::Bool(b.value)),
                self.types.known(Ty::Bool),
            ),
            other => {
                return Err(err(
                    other.span(),
                    "only numbers and booleans are literals in kernels",
                ))
            }
        };
        Ok(Expr {
            kind,
            ty,
            src: At(span),
        })
    }

    fn check_binary(&mut self, op: BinOp, lt: TyId, rt: TyId, span: Span) -> Result<()> {
        let is_bool = |t: &Types, id| t.get(id) == Some(Ty::Bool);
        let known_non_int = |t: &Types, id| !t.is_int(id) && t.get(id).is_some();
        let problem = match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem
                if is_bool(&self.types, lt) || is_bool(&self.types, rt) =>
            {
                Some("arithmetic on `bool`")
            }
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor
                if self.types.is_float(lt) || self.types.is_float(rt) =>
            {
                Some("bit operations are for integers and `bool`")
            }
            BinOp::Shl | BinOp::Shr if known_non_int(&self.types, lt) => {
                Some("shifts are for integers")
            }
            BinOp::Shl | BinOp::Shr if known_non_int(&self.types, rt) => {
                Some("a shift amount is an integer")
            }
            _ => None,
        };
        match problem {
            Some(msg) => Err(err(span, msg)),
            None => Ok(()),
        }
    }

    fn expr(&mut self, e: &syn::Expr) -> Result<Expr> {
        let span = e.span();
        match e {
            syn::Expr::Lit(l) => self.lit(&l.lit),
            syn::Expr::Paren(p) => self.expr(&p.expr),
            syn::Expr::Group(g) => self.expr(&g.expr),
            syn::Expr::Path(p) => {
                let name = p
                    .path
                    .get_ident()
                    .ok_or_else(|| err(p.span(), "only locals and parameters can be named here"))?
                    .to_string();
                match self.lookup(&name) {
                    Some(Binding::Param(i)) => match self.params[i].kind {
                        ParamKind::Scalar(_) => Ok(Expr {
                            kind: ExprKind::Param(i),
                            ty: self.param_ty[i],
                            src: At(span),
                        }),
                        ParamKind::Slice { .. } | ParamKind::Structs { .. } => Err(err(
                            span,
                            format!(
                                "`{name}` is a slice: index it (`{name}[i]`) or take its `len()`"
                            ),
                        )),
                    },
                    Some(Binding::Struct(_)) => Err(self.whole_struct_error(span)),
                    Some(Binding::Local(l)) if self.locals[l].array.is_none() => Ok(Expr {
                        kind: ExprKind::Local(l),
                        ty: self.locals[l].ty,
                        src: At(span),
                    }),
                    Some(Binding::Local(_)) => {
                        Err(err(span, format!("`{name}` is an array: index it (arrays are copied element by element)")))
                    }
                    Some(Binding::Const(i)) => {
                        let ty = self.types.known(self.consts[i]);
                        Ok(Expr {
                            kind: ExprKind::ConstParam(i),
                            ty,
                            src: At(span),
                        })
                    }
                    None => Err(err(span, format!("cannot find `{name}` in this kernel"))),
                }
            }
            syn::Expr::Binary(b) => {
                if compound_op(&b.op).is_some() {
                    return Err(err(span, "a compound assignment is a statement"));
                }
                let op = bin_op(&b.op)
                    .ok_or_else(|| err(span, "operator not in the kernel language"))?;
                let l = self.expr(&b.left)?;
                let r = self.expr(&b.right)?;
                self.check_binary(op, l.ty, r.ty, span)?;
                let ty = match op {
                    BinOp::And | BinOp::Or => {
                        self.expect_ty(&l, Ty::Bool, "`&&`/`||`")?;
                        self.expect_ty(&r, Ty::Bool, "`&&`/`||`")?;
                        self.types.known(Ty::Bool)
                    }
                    _ if op.is_comparison() => {
                        self.unify(l.ty, r.ty, span, "a comparison")?;
                        self.types.known(Ty::Bool)
                    }
                    BinOp::Shl | BinOp::Shr => l.ty,
                    _ => {
                        self.unify(l.ty, r.ty, span, "this operation")?;
                        l.ty
                    }
                };
                Ok(Expr {
                    kind: ExprKind::Binary(op, Box::new(l), Box::new(r), ()),
                    ty,
                    src: At(span),
                })
            }
            syn::Expr::Unary(u) => match u.op {
                syn::UnOp::Neg(_) => {
                    let a = self.expr(&u.expr)?;
                    if let Some(t) = self.types.get(a.ty) {
                        if !(t.is_signed() || t.is_float()) {
                            return Err(err(span, format!("cannot negate a `{}`", t.name())));
                        }
                    }
                    let ty = a.ty;
                    Ok(Expr {
                        kind: ExprKind::Unary(UnOp::Neg, Box::new(a)),
                        ty,
                        src: At(span),
                    })
                }
                syn::UnOp::Not(_) => {
                    let a = self.expr(&u.expr)?;
                    if self.types.is_float(a.ty) {
                        return Err(err(span, "`!` is for `bool` and integers"));
                    }
                    let ty = a.ty;
                    Ok(Expr {
                        kind: ExprKind::Unary(UnOp::Not, Box::new(a)),
                        ty,
                        src: At(span),
                    })
                }
                syn::UnOp::Deref(_) => {
                    let (base, index) = self.unchecked(&u.expr, false)?;
                    let ty = self.base_ty(base);
                    Ok(Expr {
                        kind: ExprKind::Load {
                            base,
                            index: Box::new(index),
                            check: false,
                            index_fits_i32: (),
                            field: None,
                        },
                        ty,
                        src: At(span),
                    })
                }
                _ => Err(err(span, "operator not in the kernel language")),
            },
            syn::Expr::Cast(c) => {
                let target = scalar_ty(&c.ty).ok_or_else(|| {
                    err(
                        c.ty.span(),
                        "`as` converts between bool, i32, u32, i64, u64, usize, f32, f64",
                    )
                })?;
                let a = self.expr(&c.expr)?;
                if target.is_half() || self.types.get(a.ty).is_some_and(Ty::is_half) {
                    return Err(err(
                        span,
                        "f16 and bf16 have no `as` (as in Rust): `f16::from_f32(x)`, `h.to_f32()`, `h.to_f64()`",
                    ));
                }
                if target == Ty::Bool && self.types.get(a.ty) != Some(Ty::Bool) {
                    return Err(err(span, "cannot cast to `bool` (compare with 0 instead)"));
                }
                if self.types.get(a.ty) == Some(Ty::Bool) && target.is_float() {
                    return Err(err(span, "cannot cast `bool` to a float"));
                }
                let ty = self.types.known(target);
                Ok(Expr {
                    kind: ExprKind::Cast(Box::new(a)),
                    ty,
                    src: At(span),
                })
            }
            syn::Expr::Index(ix) => {
                if let syn::Expr::Field(f) = strip_paren(&ix.expr) {
                    if let Some((place, ty)) =
                        self.field_access(&f.base, &f.member, Some(&ix.index), false, span)?
                    {
                        return Ok(place.read(ty, span));
                    }
                }
                if let Some((place, ty)) =
                    self.array_element_item(&ix.expr, &ix.index, false, span)?
                {
                    return Ok(place.read(ty, span));
                }
                if self.is_struct_expr(e) {
                    return Err(self.whole_struct_error(span));
                }
                let (base, ty) = self.indexable(&ix.expr, false)?;
                let index = self.index_expr(&ix.index)?;
                Ok(Expr {
                    kind: ExprKind::Load {
                        base,
                        index: Box::new(index),
                        check: true,
                        index_fits_i32: (),
                        field: None,
                    },
                    ty,
                    src: At(span),
                })
            }
            syn::Expr::Field(f) => {
                let (place, ty) = self
                    .field_access(&f.base, &f.member, None, false, span)?
                    .ok_or_else(|| {
                        err(span, "fields are of struct slices' elements (`p[i].x`) and struct locals")
                    })?;
                Ok(place.read(ty, span))
            }
            syn::Expr::Struct(_) => Err(self.whole_struct_error(span)),
            syn::Expr::MethodCall(m) => self.method(m),
            syn::Expr::Call(c) => self.call(c),
            syn::Expr::If(i) => {
                // A value: `if c { a } else { b }` with single expressions in both branches.
                let cond = self.expr(&i.cond)?;
                self.expect_ty(&cond, Ty::Bool, "an `if` condition")?;
                let single = |b: &syn::Block| -> Option<syn::Expr> {
                    match b.stmts.as_slice() {
                        [syn::Stmt::Expr(e, None)] => Some(e.clone()),
                        _ => None,
                    }
                };
                let then = single(&i.then_branch);
                let els = match &i.else_branch {
                    Some((_, e)) => match &**e {
                        syn::Expr::Block(b) => single(&b.block),
                        syn::Expr::If(_) => Some((**e).clone()),
                        _ => None,
                    },
                    None => None,
                };
                let (Some(then), Some(els)) = (then, els) else {
                    return Err(err(
                        span,
                        "an `if` used as a value has one expression in each branch and an `else`",
                    ));
                };
                let a = self.expr(&then)?;
                let b = self.expr(&els)?;
                self.unify(a.ty, b.ty, span, "the branches of this `if`")?;
                let ty = a.ty;
                Ok(Expr {
                    kind: ExprKind::Select(Box::new(cond), Box::new(a), Box::new(b)),
                    ty,
                    src: At(span),
                })
            }
            syn::Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
                syn::Stmt::Expr(inner, None) => self.expr(inner),
                _ => Err(err(span, "a block used as a value holds one expression")),
            },
            syn::Expr::Unsafe(u) => {
                let [syn::Stmt::Expr(inner, None)] = u.block.stmts.as_slice() else {
                    return Err(err(
                        span,
                        "an `unsafe` block used as a value holds one expression",
                    ));
                };
                self.unsafe_depth += 1;
                let v = self.expr(inner);
                self.unsafe_depth -= 1;
                v
            }
            syn::Expr::Macro(m) => Err(err(
                m.span(),
                format!("macros cannot be used inside a kernel ({SUBSET})"),
            )),
            syn::Expr::Closure(c) => Err(err(c.span(), "closures cannot be used inside a kernel")),
            syn::Expr::Reference(r) => Err(err(
                r.span(),
                "references cannot be taken inside a kernel (index slices instead)",
            )),
            syn::Expr::Tuple(t) => Err(err(t.span(), "tuples are not in the kernel language")),
            syn::Expr::Array(a) => Err(err(
                a.span(),
                "an array list is a `let`'s value only: `let a = [x, y, z];` (or `let mut a = [0.0f32; N];`)",
            )),
            syn::Expr::Range(r) => Err(err(r.span(), "ranges appear only in `for` loops")),
            other => Err(err(
                other.span(),
                format!("this expression is not in the kernel language ({SUBSET})"),
            )),
        }
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> Result<Expr> {
        let span = m.span();
        let name = m.method.to_string();
        if m.turbofish.is_some() {
            return Err(err(span, "no turbofish on methods in kernels"));
        }
        if name == "len" {
            if !m.args.is_empty() {
                return Err(err(span, "`len()` takes no argument"));
            }
            let base = match self.struct_slice(&m.receiver) {
                Some(p) => Base::Param(p),
                None => self.indexable(&m.receiver, false)?.0,
            };
            let ty = self.types.known(Ty::Usize);
            return Ok(Expr {
                kind: ExprKind::Len(base),
                ty,
                src: At(span),
            });
        }
        if name == "to_f32" || name == "to_f64" {
            if !m.args.is_empty() {
                return Err(err(span, format!("`{name}()` takes no argument")));
            }
            let a = self.expr(&m.receiver)?;
            // On halves the `half` crate's; on f32 and f64 `sycl::Float`'s (generic kernels).
            let Some(from) = self.types.get(a.ty).filter(|t| t.is_float()) else {
                return Err(err(
                    span,
                    format!("`{name}()` converts a float (annotate the receiver's type)"),
                ));
            };
            let to = if name == "to_f32" { Ty::F32 } else { Ty::F64 };
            if from == to {
                return Ok(a);
            }
            let ty = self.types.known(to);
            return Ok(Expr {
                kind: ExprKind::Cast(Box::new(a)),
                ty,
                src: At(span),
            });
        }
        if name == "get_unchecked" || name == "get_unchecked_mut" {
            return Err(err(
                span,
                format!("write `*x.{name}(i)`: the element, not a reference to it"),
            ));
        }
        if let Some(op) = match name.as_str() {
            // The language's `+ - *` wrap on integers already (spec/kernels.md).
            "wrapping_add" => Some(BinOp::Add),
            "wrapping_sub" => Some(BinOp::Sub),
            "wrapping_mul" => Some(BinOp::Mul),
            _ => None,
        } {
            if m.args.len() != 1 {
                return Err(err(span, format!("`{name}` takes 1 argument(s)")));
            }
            let l = self.expr(&m.receiver)?;
            let r = self.expr(&m.args[0])?;
            self.unify(l.ty, r.ty, span, &format!("the arguments of `{name}`"))?;
            if !self.types.is_int(l.ty) {
                return Err(err(span, format!("`{name}` is for integers")));
            }
            let ty = l.ty;
            return Ok(Expr {
                kind: ExprKind::Binary(op, Box::new(l), Box::new(r), ()),
                ty,
                src: At(span),
            });
        }
        let f = MathFn::from_name(&name).ok_or_else(|| {
            let math: Vec<&str> = MathFn::ALL.iter().map(|m| m.name()).collect();
            err(
                m.method.span(),
                format!(
                    "method `{name}` is not in the kernel language (math: {}; wrapping_add, \
                     wrapping_sub, wrapping_mul; slices: len)",
                    math.join(", ")
                ),
            )
        })?;
        if m.args.len() != f.extra_args() {
            return Err(err(
                span,
                format!("`{name}` takes {} argument(s)", f.extra_args()),
            ));
        }
        let recv = self.expr(&m.receiver)?;
        let mut args = vec![recv];
        for a in &m.args {
            let a = self.expr(a)?;
            let want = match f.fixed_arg() {
                Some(s) => self.types.known(s),
                None => args[0].ty,
            };
            self.unify(want, a.ty, span, &format!("the arguments of `{name}`"))?;
            args.push(a);
        }
        let t = args[0].ty;
        let is_float = self.types.is_float(t);
        let is_int = self.types.is_int(t);
        if !(f.for_floats() && is_float || f.for_ints() && is_int) {
            if self.types.get(t).is_some() || is_int || is_float {
                return Err(err(
                    span,
                    format!(
                        "`{name}` is for {}",
                        match (f.for_floats(), f.for_ints()) {
                            (true, true) => "floats and integers",
                            (true, false) => "floats",
                            _ => "integers",
                        }
                    ),
                ));
            }
            // An unknown receiver (a helper result): math makes it a float, integer
            // functions an integer.
            let v = if f.for_floats() {
                self.types.float_var()
            } else {
                self.types.int_var()
            };
            self.unify(t, v, span, &format!("`{name}`"))?;
        }
        if f == MathFn::Abs {
            if let Some(ty) = self.types.get(t) {
                if ty.is_int() && !ty.is_signed() {
                    return Err(err(span, "`abs` of an unsigned integer"));
                }
            }
        }
        let ty = match f.fixed_result() {
            Some(s) => self.types.known(s),
            None => t,
        };
        Ok(Expr {
            kind: ExprKind::Math(f, args),
            ty,
            src: At(span),
        })
    }

    fn call(&mut self, c: &syn::ExprCall) -> Result<Expr> {
        let span = c.span();
        let syn::Expr::Path(fp) = &*c.func else {
            return Err(err(
                c.func.span(),
                "call a kernel function or helper by name",
            ));
        };
        let path = &fp.path;
        if let Some(e) = self.half_conversion(path, c)? {
            return Ok(e);
        }
        let name = call_name(path);
        let builtin = is_builtin_path(path);
        let generic_args = path
            .segments
            .last()
            .map(|s| !s.arguments.is_none())
            .unwrap_or(false);
        if builtin {
            if let Some(q) = Query::from_name(&name) {
                let [d] = c.args.iter().collect::<Vec<_>>()[..] else {
                    return Err(err(
                        span,
                        format!("`{name}(d)` takes a dimension 0, 1 or 2"),
                    ));
                };
                let d = match strip_paren(d) {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(i),
                        ..
                    }) => i.base10_parse::<u8>().ok().filter(|d| *d < 3),
                    _ => None,
                }
                .ok_or_else(|| err(d.span(), "the dimension is a literal 0, 1 or 2"))?;
                if self.role == Role::Helper {
                    return Err(err(
                        span,
                        "work-item queries belong to kernels, not helpers",
                    ));
                }
                return Ok(self.usize_expr(ExprKind::Query(q, d), span));
            }
            if name == "barrier" {
                return Err(err(span, "`barrier()` is a statement"));
            }
            if name == "local_array" {
                return Err(err(
                    span,
                    "`local_array` declares a local: `let tile = local_array::<f32, 256>();`",
                ));
            }
            if name == "atomic_store" {
                return Err(err(
                    span,
                    "`atomic_store(slice, index, value);` is a statement",
                ));
            }
            if name == "atomic_fence" {
                return Err(err(span, "`atomic_fence(order, scope);` is a statement"));
            }
            if name == "kernel_fail" {
                return Err(err(span, "`kernel_fail(Failure::..);` is a statement"));
            }
            if let Some(op) = AtomicOp::from_name(&name) {
                return self.atomic(op, c);
            }
            if let Some(op) = GroupOp::from_name(&name) {
                return self.group(op, &name, c);
            }
            if let Some(q) = SubGroupQuery::from_name(&name) {
                if !c.args.is_empty() {
                    return Err(err(span, format!("`{name}()` takes no argument")));
                }
                if self.role == Role::Helper {
                    return Err(err(
                        span,
                        "sub-group queries belong to kernels, not helpers",
                    ));
                }
                return Ok(self.usize_expr(ExprKind::SubGroupQuery(q), span));
            }
            if let Some(op) = SubGroupOp::from_name(&name) {
                return self.sub_group(op, &name, c);
            }
        }
        if generic_args {
            return Err(err(span, "helpers take no generic arguments"));
        }
        // A helper marked #[sycl::kernel_fn]: its result type comes from the use. A slice
        // parameter passes whole (`dot(x, y)`); a written one at most once per call, as
        // Rust's borrows allow. An array (`dot(&acc, tile)`) passes whole too, once per call.
        let mut args = Vec::new();
        for a in &c.args {
            match self.slice_arg(a)? {
                Some(e) if matches!(e.kind, ExprKind::ArrayArg(_)) => {
                    if args.iter().any(|b: &Expr| b.kind == e.kind) {
                        return Err(err(
                            a.span(),
                            "an array can be passed once per call (a helper may write it)",
                        ));
                    }
                    args.push(e);
                }
                Some(e) => {
                    let ExprKind::SliceArg(p) = e.kind else {
                        unreachable!("slice_arg makes slice arguments")
                    };
                    let written =
                        matches!(self.params[p].kind, ParamKind::Slice { mutable: true, .. });
                    let again = args
                        .iter()
                        .any(|b: &Expr| matches!(b.kind, ExprKind::SliceArg(q) if q == p));
                    if again && written {
                        return Err(err(
                            a.span(),
                            format!(
                                "`{}` is written (`&mut`): it can be passed once per call",
                                self.params[p].name
                            ),
                        ));
                    }
                    args.push(e);
                }
                None => args.push(self.expr(a)?),
            }
        }
        let ty = self.types.unknown();
        Ok(Expr {
            kind: ExprKind::Call(path.clone(), args),
            ty,
            src: At(span),
        })
    }

    /// A slice parameter named as a call argument (`x`, `&x`, `&mut y`, `&*x`), or an array
    /// local (`&acc`, `&mut acc`, `tile`), passed whole.
    fn slice_arg(&mut self, a: &syn::Expr) -> Result<Option<Expr>> {
        let mut e = strip_paren(a);
        let mut by_mut_ref = false;
        if let syn::Expr::Reference(r) = e {
            by_mut_ref = r.mutability.is_some();
            e = strip_paren(&r.expr);
            if let syn::Expr::Unary(u) = e {
                if matches!(u.op, syn::UnOp::Deref(_)) {
                    e = strip_paren(&u.expr);
                }
            }
        }
        let syn::Expr::Path(p) = e else {
            return Ok(None);
        };
        let Some(name) = p.path.get_ident().map(|i| i.to_string()) else {
            return Ok(None);
        };
        let i = match self.lookup(&name) {
            Some(Binding::Param(i)) => i,
            Some(Binding::Local(l)) if self.locals[l].array.is_some() => {
                if by_mut_ref && self.locals[l].is_private_array() && !self.locals[l].info.user_mut
                {
                    return Err(err(
                        a.span(),
                        format!(
                            "`{name}` is not `mut`: declare it with `let mut` to pass it as `&mut`"
                        ),
                    ));
                }
                let ty = self.locals[l].ty;
                return Ok(Some(Expr {
                    kind: ExprKind::ArrayArg(l),
                    ty,
                    src: At(a.span()),
                }));
            }
            _ => return Ok(None),
        };
        let ParamKind::Slice { elem, mutable } = self.params[i].kind else {
            return Ok(None);
        };
        if by_mut_ref && !mutable {
            return Err(err(
                a.span(),
                format!("`{name}` is `&[T]`: declare it `&mut [T]` to pass it as `&mut`"),
            ));
        }
        let ty = self.types.known(elem);
        Ok(Some(Expr {
            kind: ExprKind::SliceArg(i),
            ty,
            src: At(a.span()),
        }))
    }

    /// A query's value: a `usize`.
    fn usize_expr(&mut self, kind: ExprKind, span: Span) -> Expr {
        let ty = self.types.known(Ty::Usize);
        Expr {
            kind,
            ty,
            src: At(span),
        }
    }

    /// `sub_group_shuffle(x, lane)` and the other collectives: the value's type is the
    /// result's; lanes, deltas and masks are `usize`.
    fn sub_group(&mut self, op: SubGroupOp, name: &str, c: &syn::ExprCall) -> Result<Expr> {
        let span = c.span();
        if self.role == Role::Helper {
            return Err(err(
                span,
                "sub-group operations belong to kernels, not helpers",
            ));
        }
        let args: Vec<&syn::Expr> = c.args.iter().collect();
        let usage = match op {
            SubGroupOp::Broadcast | SubGroupOp::Shuffle => format!("`{name}(x, lane)`"),
            SubGroupOp::ShiftLeft | SubGroupOp::ShiftRight => format!("`{name}(x, delta)`"),
            SubGroupOp::ShuffleXor => format!("`{name}(x, mask)`"),
            SubGroupOp::Collective(k) => {
                let [a] = args[..] else {
                    return Err(err(span, format!("`{name}(x)` takes one value")));
                };
                let value = self.collective_value(k, name, a, span)?;
                let ty = value.ty;
                return Ok(Expr {
                    kind: ExprKind::SubGroup(op, vec![value]),
                    ty,
                    src: At(span),
                });
            }
        };
        let want = if op.takes_lane() { 2 } else { 1 };
        if args.len() != want {
            return Err(err(
                span,
                format!(
                    "{usage} takes {want} argument{}",
                    if want == 1 { "" } else { "s" }
                ),
            ));
        }
        let value = self.expr(args[0])?;
        if self.types.get(value.ty).is_some_and(Ty::is_half) {
            return Err(err(
                span,
                "sub-group operations on halves: convert to f32 first (`x.to_f32()`)",
            ));
        }
        if self.types.get(value.ty) == Some(Ty::Bool) {
            return Err(err(
                value.src.0,
                "sub-group operations are over numbers (i32, u32, i64, u64, usize, f32, f64)",
            ));
        }
        if self.types.get(value.ty).is_none()
            && !self.types.is_int(value.ty)
            && !self.types.is_float(value.ty)
        {
            return Err(err(value.src.0, "annotate this value's type"));
        }
        let ty = value.ty;
        let mut operands = vec![value];
        if op.takes_lane() {
            let lane = self.expr(args[1])?;
            self.expect_ty(
                &lane,
                Ty::Usize,
                &format!("{usage} (its second argument is a `usize`)"),
            )?;
            operands.push(lane);
        }
        Ok(Expr {
            kind: ExprKind::SubGroup(op, operands),
            ty,
            src: At(span),
        })
    }

    /// `group_sum(x)`, `group_inclusive_sum(x)`, `group_any(c)`, `group_broadcast(x, id)` and
    /// the other work-group collectives.
    fn group(&mut self, op: GroupOp, name: &str, c: &syn::ExprCall) -> Result<Expr> {
        let span = c.span();
        if self.role == Role::Helper {
            return Err(err(
                span,
                "group collectives belong to kernels, not helpers",
            ));
        }
        let args: Vec<&syn::Expr> = c.args.iter().collect();
        let operands = match op {
            GroupOp::Collective(k) => {
                let [a] = args[..] else {
                    return Err(err(span, format!("`{name}(x)` takes one value")));
                };
                vec![self.collective_value(k, name, a, span)?]
            }
            GroupOp::Broadcast => {
                let usage = "`group_broadcast(x, id)` takes a value and the local linear id of the work-item that gives it";
                let [a, id] = args[..] else {
                    return Err(err(span, usage));
                };
                let value =
                    self.collective_value(Collective::Reduce(Reduce::Sum), name, a, span)?;
                let id = self.expr(id)?;
                self.expect_ty(&id, Ty::Usize, &format!("{usage} (a `usize`)"))?;
                vec![value, id]
            }
        };
        let ty = operands[0].ty;
        Ok(Expr {
            kind: ExprKind::Group(op, operands),
            ty,
            src: At(span),
        })
    }

    /// The value of a reduction, scan or vote (`group_` or `sub_group_` `name`): a `bool` for
    /// votes; else a number other than a half, an integer for `& | ^`.
    fn collective_value(
        &mut self,
        k: Collective,
        name: &str,
        a: &syn::Expr,
        span: Span,
    ) -> Result<Expr> {
        let value = self.expr(a)?;
        if k.is_vote() {
            self.expect_ty(
                &value,
                Ty::Bool,
                &format!("`{name}(c)` (it takes a `bool`)"),
            )?;
            return Ok(value);
        }
        let known = self.types.get(value.ty);
        if known == Some(Ty::Bool) {
            return Err(err(
                value.src.0,
                format!("`{name}` is over numbers: for `bool`s use `group_any`/`group_all` (`sub_group_any`/`sub_group_all`)"),
            ));
        }
        if known.is_some_and(Ty::is_half) {
            return Err(err(
                span,
                format!("collectives over halves compute in f32: `{name}(x.to_f32())`"),
            ));
        }
        let float = known.is_some_and(Ty::is_float) || self.types.is_float(value.ty);
        if k.op().is_bitwise() && float {
            return Err(err(
                value.src.0,
                format!("`{name}` is over integers (`& | ^` have no float form)"),
            ));
        }
        if known.is_none() && !self.types.is_int(value.ty) && !float {
            return Err(err(value.src.0, "annotate this value's type"));
        }
        Ok(value)
    }

    fn atomic(&mut self, op: AtomicOp, c: &syn::ExprCall) -> Result<Expr> {
        let span = c.span();
        let args: Vec<&syn::Expr> = c.args.iter().collect();
        let name = op.name();
        let usage = match op {
            AtomicOp::Load => "`atomic_load(slice, index)` returns the element".to_owned(),
            AtomicOp::Store => "`atomic_store(slice, index, value);` is a statement".to_owned(),
            AtomicOp::CompareExchange => {
                "`atomic_compare_exchange(slice, index, current, new)` returns the value it found"
                    .to_owned()
            }
            _ => format!("`atomic_{name}(slice, index, value)` returns the old value"),
        };
        let fixed = 2 + op.values();
        if args.len() < fixed || args.len() > fixed + 2 {
            return Err(err(
                span,
                format!(
                    "{usage}; an order and a scope may follow (`Ordering::AcqRel, MemoryScope::Device`)"
                ),
            ));
        }
        if self.role == Role::Helper {
            return Err(err(span, "atomics belong to kernels, not helpers"));
        }
        let write = op != AtomicOp::Load;
        let (base, ty) = self.indexable(args[0], write)?;
        if let Base::Local(l) = base {
            if self.locals[l].is_private_array() {
                return Err(err(
                    args[0].span(),
                    "a private array is the work-item's own: read and write it directly (atomics are for slices and local arrays)",
                ));
            }
        }
        let index = self.index_expr(args[1])?;
        let mut values = Vec::new();
        for a in &args[2..fixed] {
            let v = self.expr(a)?;
            self.unify(v.ty, ty, v.src.0, "an atomic's value")?;
            values.push(v);
        }
        let order = match args.get(fixed) {
            Some(a) => memory_order(a)?,
            None => MemoryOrder::Relaxed,
        };
        let scope = match args.get(fixed + 1) {
            Some(a) => memory_scope(a)?,
            None => MemoryScope::Device,
        };
        if !op.allows(order) {
            return Err(err(
                args[fixed].span(),
                format!(
                    "`atomic_{name}` cannot be `{}` (as in Rust: loads take Relaxed, Acquire or SeqCst; stores Relaxed, Release or SeqCst)",
                    order.rust_name()
                ),
            ));
        }
        let elem = self.types.get(ty).expect("element types are known");
        if !op.takes(elem) {
            return Err(err(
                span,
                format!(
                    "`atomic_{name}` on `{}` is not in the kernel language (i32, u32, u64; also f32 for load, store, exchange and fetch_add)",
                    elem.name()
                ),
            ));
        }
        // Local memory is the work-group's: every scope means the work-group there.
        let scope = match base {
            Base::Local(_) => MemoryScope::WorkGroup,
            Base::Param(_) => scope,
        };
        Ok(Expr {
            kind: ExprKind::Atomic {
                op,
                base,
                index: Box::new(index),
                values,
                order,
                scope,
            },
            ty,
            src: At(span),
        })
    }

    /// `f16::from_f32(x)`, `bf16::from_f32(x)` (also as `half::f16::..`), `f32::from(h)`,
    /// `f64::from(h)`: conversions of the `half` crate, as casts.
    fn half_conversion(&mut self, path: &syn::Path, c: &syn::ExprCall) -> Result<Option<Expr>> {
        let n = path.segments.len();
        if n < 2 {
            return Ok(None);
        }
        let func = path.segments[n - 1].ident.to_string();
        let ty_path = syn::Path {
            leading_colon: path.leading_colon,
            segments: path.segments.iter().take(n - 1).cloned().collect(),
        };
        let span = c.span();
        let [arg] = c.args.iter().collect::<Vec<_>>()[..] else {
            return Ok(None);
        };
        let (from, to) =
            match (half_path(&ty_path), func.as_str()) {
                (Some(h), "from_f32") => (Some(Ty::F32), h),
                (Some(_), "from_f64") => return Err(err(
                    span,
                    "`from_f64` would round twice through f32: convert with `from_f32(x as f32)`",
                )),
                (None, "from") if n == 2 => match path.segments[0].ident.to_string().as_str() {
                    "f32" => (None, Ty::F32),
                    "f64" => (None, Ty::F64),
                    _ => return Ok(None),
                },
                // `sycl::Float::from_f32` on the full-width floats (generic kernels' instances).
                (None, "from_f32") if n == 2 => match path.segments[0].ident.to_string().as_str() {
                    "f32" => (Some(Ty::F32), Ty::F32),
                    "f64" => (Some(Ty::F32), Ty::F64),
                    _ => return Ok(None),
                },
                _ => return Ok(None),
            };
        let a = self.expr(arg)?;
        if from == Some(to) {
            // `f32::from_f32(x)`: `x` itself.
            self.expect_ty(&a, to, &format!("`{func}`'s argument"))?;
            return Ok(Some(a));
        }
        match from {
            Some(f) => self.expect_ty(&a, f, &format!("`{func}`'s argument"))?,
            None => {
                if !self.types.get(a.ty).is_some_and(Ty::is_half) {
                    return Err(err(
                        span,
                        format!("`{}::from` converts an f16 or bf16 here", to.name()),
                    ));
                }
            }
        }
        let ty = self.types.known(to);
        Ok(Some(Expr {
            kind: ExprKind::Cast(Box::new(a)),
            ty,
            src: At(span),
        }))
    }

    /// `atomic_fence(order, scope);`
    fn fence(&self, c: &syn::ExprCall) -> Result<StmtKind> {
        let usage = "`atomic_fence(order, scope)`, e.g. `atomic_fence(Ordering::AcqRel, MemoryScope::System)`";
        let [o, sc] = c.args.iter().collect::<Vec<_>>()[..] else {
            return Err(err(c.span(), usage));
        };
        if self.role == Role::Helper {
            return Err(err(c.span(), "fences belong to kernels, not helpers"));
        }
        let order = memory_order(o)?;
        if order == MemoryOrder::Relaxed {
            return Err(err(
                o.span(),
                "a relaxed fence orders nothing (Rust's `fence(Relaxed)` panics): use Acquire, Release, AcqRel or SeqCst",
            ));
        }
        Ok(StmtKind::Fence(order, memory_scope(sc)?))
    }
}

/// The last two segments of a path expression (`Ordering::Acquire` → ("Ordering", "Acquire")).
fn enum_path(e: &syn::Expr) -> Option<(String, String)> {
    let syn::Expr::Path(p) = strip_paren(e) else {
        return None;
    };
    let segs: Vec<String> = p
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    match &segs[..] {
        [.., ty, v] => Some((ty.clone(), v.clone())),
        _ => None,
    }
}

/// `Ordering::Acquire` (also as `std::sync::atomic::Ordering::Acquire`).
fn memory_order(e: &syn::Expr) -> Result<MemoryOrder> {
    match enum_path(e) {
        Some((t, v)) if t == "Ordering" => MemoryOrder::from_name(&v),
        _ => None,
    }
    .ok_or_else(|| {
        err(
            e.span(),
            "a memory order is written `Ordering::Relaxed`, `Acquire`, `Release`, `AcqRel` or `SeqCst` (a constant: orders are decided when the kernel is built)",
        )
    })
}

/// `MemoryScope::System` (`WorkGroup`, `Device`).
fn memory_scope(e: &syn::Expr) -> Result<MemoryScope> {
    match enum_path(e) {
        Some((t, v)) if t == "MemoryScope" => MemoryScope::from_name(&v),
        _ => None,
    }
    .ok_or_else(|| {
        err(
            e.span(),
            "a memory scope is written `MemoryScope::WorkGroup`, `MemoryScope::Device` or `MemoryScope::System`",
        )
    })
}

fn strip_paren(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip_paren(&p.expr),
        syn::Expr::Group(g) => strip_paren(&g.expr),
        other => other,
    }
}

fn is_block_like(e: &syn::Expr) -> bool {
    matches!(
        e,
        syn::Expr::If(_)
            | syn::Expr::While(_)
            | syn::Expr::Loop(_)
            | syn::Expr::ForLoop(_)
            | syn::Expr::Block(_)
            | syn::Expr::Unsafe(_)
    )
}

/// `if c { a } else { b }` (or `else if`) with one expression in every branch: a value.
fn is_value_if(e: &syn::Expr) -> bool {
    let syn::Expr::If(i) = e else { return false };
    let single = |b: &syn::Block| matches!(b.stmts.as_slice(), [syn::Stmt::Expr(_, None)]);
    single(&i.then_branch)
        && match &i.else_branch {
            Some((_, els)) => match &**els {
                syn::Expr::Block(b) => single(&b.block),
                other => is_value_if(other),
            },
            None => false,
        }
}

fn is_builtin_path_call(c: &syn::ExprCall, name: &str) -> bool {
    match &*c.func {
        syn::Expr::Path(p) => is_builtin_path(&p.path) && call_name(&p.path) == name,
        _ => false,
    }
}

/// `local_array::<T, N>()` → (T, N, N's const parameter); `len` reads N.
#[allow(clippy::type_complexity)]
fn local_array_call(
    e: &syn::Expr,
    len: &dyn Fn(&syn::Expr) -> Option<(usize, Option<usize>)>,
) -> Result<Option<(Ty, usize, Option<usize>)>> {
    let syn::Expr::Call(c) = strip_paren(e) else {
        return Ok(None);
    };
    let syn::Expr::Path(p) = &*c.func else {
        return Ok(None);
    };
    if !is_builtin_path(&p.path) || call_name(&p.path) != "local_array" {
        return Ok(None);
    }
    let usage = "`local_array::<T, N>()`: T an element type, N a literal length or a `usize` const parameter";
    let syn::PathArguments::AngleBracketed(ab) =
        &p.path.segments.last().expect("a segment").arguments
    else {
        return Err(err(p.span(), usage));
    };
    let args: Vec<_> = ab.args.iter().collect();
    let (Some(syn::GenericArgument::Type(t)), Some(len_arg)) = (args.first(), args.get(1)) else {
        return Err(err(ab.span(), usage));
    };
    let elem = scalar_ty(t)
        .filter(|t| t.is_element())
        .ok_or_else(|| err(t.span(), usage))?;
    let len_expr = match len_arg {
        syn::GenericArgument::Const(e) => e.clone(),
        // A const parameter's name parses as a type.
        syn::GenericArgument::Type(syn::Type::Path(tp)) if tp.qself.is_none() => {
            syn::Expr::Path(syn::ExprPath {
                attrs: Vec::new(),
                qself: None,
                path: tp.path.clone(),
            })
        }
        other => return Err(err(other.span(), usage)),
    };
    let (len, param) = len(&len_expr).ok_or_else(|| err(len_expr.span(), usage))?;
    if len == 0 || len > 1 << 16 {
        return Err(err(
            len_expr.span(),
            "a local array holds 1 to 65536 elements",
        ));
    }
    if !c.args.is_empty() {
        return Err(err(c.span(), usage));
    }
    Ok(Some((elem, len, param)))
}

/// A constant length: a literal, `{ a * b }` of literals, or a product/sum of literals.
fn const_usize(e: &syn::Expr) -> Option<usize> {
    match strip_paren(e) {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i.base10_parse().ok(),
        syn::Expr::Block(b) => match b.block.stmts.as_slice() {
            [syn::Stmt::Expr(e, None)] => const_usize(e),
            _ => None,
        },
        syn::Expr::Binary(b) => {
            let (l, r) = (const_usize(&b.left)?, const_usize(&b.right)?);
            match b.op {
                syn::BinOp::Mul(_) => l.checked_mul(r),
                syn::BinOp::Add(_) => l.checked_add(r),
                _ => None,
            }
        }
        _ => None,
    }
}

fn bin_op(op: &syn::BinOp) -> Option<BinOp> {
    Some(match op {
        syn::BinOp::Add(_) => BinOp::Add,
        syn::BinOp::Sub(_) => BinOp::Sub,
        syn::BinOp::Mul(_) => BinOp::Mul,
        syn::BinOp::Div(_) => BinOp::Div,
        syn::BinOp::Rem(_) => BinOp::Rem,
        syn::BinOp::BitAnd(_) => BinOp::BitAnd,
        syn::BinOp::BitOr(_) => BinOp::BitOr,
        syn::BinOp::BitXor(_) => BinOp::BitXor,
        syn::BinOp::Shl(_) => BinOp::Shl,
        syn::BinOp::Shr(_) => BinOp::Shr,
        syn::BinOp::Eq(_) => BinOp::Eq,
        syn::BinOp::Ne(_) => BinOp::Ne,
        syn::BinOp::Lt(_) => BinOp::Lt,
        syn::BinOp::Le(_) => BinOp::Le,
        syn::BinOp::Gt(_) => BinOp::Gt,
        syn::BinOp::Ge(_) => BinOp::Ge,
        syn::BinOp::And(_) => BinOp::And,
        syn::BinOp::Or(_) => BinOp::Or,
        _ => return None,
    })
}

fn compound_op(op: &syn::BinOp) -> Option<BinOp> {
    Some(match op {
        syn::BinOp::AddAssign(_) => BinOp::Add,
        syn::BinOp::SubAssign(_) => BinOp::Sub,
        syn::BinOp::MulAssign(_) => BinOp::Mul,
        syn::BinOp::DivAssign(_) => BinOp::Div,
        syn::BinOp::RemAssign(_) => BinOp::Rem,
        syn::BinOp::BitAndAssign(_) => BinOp::BitAnd,
        syn::BinOp::BitOrAssign(_) => BinOp::BitOr,
        syn::BinOp::BitXorAssign(_) => BinOp::BitXor,
        syn::BinOp::ShlAssign(_) => BinOp::Shl,
        syn::BinOp::ShrAssign(_) => BinOp::Shr,
        _ => return None,
    })
}
