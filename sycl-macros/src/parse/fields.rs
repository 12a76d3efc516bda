//! Structs in the kernel language: struct slices read and written a field at a time
//! (`p[i].mass`, `p[i].pos[k] += v`), struct values as one local per field (a private array
//! per array field), by-value struct parameters as one scalar parameter per scalar, and whole
//! copies (`let q = p[i];`, `p[j] = q;`, `Particle { .. }`) as a copy per scalar.

use std::rc::Rc;

use proc_macro2::Span;
use syn::spanned::Spanned;

use super::*;
use crate::structs::{FieldDef, StructDef};

/// A struct value: where each field lives.
#[derive(Clone)]
pub(super) struct StructValue {
    pub def: Rc<StructDef>,
    pub slots: Vec<Slot>,
    /// Declared `let mut`.
    pub mutable: bool,
    /// A by-value parameter.
    pub param: bool,
    pub name: String,
}

/// Where a field of a struct value lives.
#[derive(Clone, Copy)]
pub(super) enum Slot {
    /// A by-value parameter's scalar field: its parameter.
    Param(usize),
    /// A scalar field: its local.
    Local(usize),
    /// An array field: its private array.
    Array(usize),
}

/// One scalar of a struct (or of an array list) being copied, read where it is.
#[derive(Clone)]
pub(super) enum Get {
    /// A temporary local, at its (perhaps not yet inferred) type.
    Temp(usize),
    Param(usize, Ty),
    Local(usize, Ty),
    ArrayItem(usize, u32, Ty),
    /// A field scalar of `param[local]`.
    Slice {
        param: usize,
        index: usize,
        ty: Ty,
        offset: u32,
        item: Option<(u32, u32)>,
    },
}

/// What a whole-struct expression reads: its struct, statements that evaluate it once (an
/// index, literal fields), and each scalar, in field order.
struct Source {
    def: Rc<StructDef>,
    pre: Vec<Stmt>,
    scalars: Vec<Get>,
}

const WHOLE: &str = "a struct is used whole only in `let q = ..;`, `x = ..;` and struct literals (`Particle { .. }`): read or write a field (`p[i].mass`)";

impl Parser {
    fn struct_def(&self, name: &str) -> Option<Rc<StructDef>> {
        self.structs.get(name).cloned()
    }

    /// The field `member` of `def`.
    fn member<'d>(&self, def: &'d StructDef, member: &syn::Member) -> Result<&'d FieldDef> {
        let syn::Member::Named(id) = member else {
            return Err(err(member.span(), "kernel structs have named fields"));
        };
        if def.is_array() && id != crate::structs::ITEMS {
            return Err(err(
                id.span(),
                format!(
                    "an element of `&[{}]` is an array: index it (`p[i][k]`)",
                    def.name
                ),
            ));
        }
        def.field(&id.to_string()).ok_or_else(|| {
            err(
                id.span(),
                format!(
                    "`{}` has no field `{id}` (its fields: {})",
                    def.name,
                    def.field_names()
                ),
            )
        })
    }

    /// A parameter `&[S]`/`&mut [S]` of a kernel struct.
    pub(super) fn struct_slice_param(
        &mut self,
        elem: &syn::Type,
        mutable: bool,
    ) -> Result<Option<(ParamKind, String)>> {
        let name = match elem {
            syn::Type::Path(p) => match p.path.get_ident() {
                Some(id) => id.to_string(),
                None => return Ok(None),
            },
            // `&[[f32; 4]]`: a struct of one array field, named as the type.
            syn::Type::Array(a) => {
                let def = crate::structs::array_element(a)?;
                let name = def.name.clone();
                self.structs.insert(name.clone(), Rc::new(def));
                name
            }
            _ => return Ok(None),
        };
        let Some(def) = self.struct_def(&name) else {
            return Ok(None);
        };
        Ok(Some((
            ParamKind::Structs {
                size: def.size,
                mutable,
            },
            name,
        )))
    }

    /// `p[i][k]` on a slice of arrays (`&[[f32; 4]]`): its item `k` as a field access;
    /// `None` if `e` is not an element of one.
    pub(super) fn array_element_item(
        &mut self,
        e: &syn::Expr,
        k: &syn::Expr,
        write: bool,
        span: Span,
    ) -> Result<Option<(Place, TyId)>> {
        let Some((p, _, _)) = self.struct_element(e) else {
            return Ok(None);
        };
        if !self.def_of_param(p).is_array() {
            return Ok(None);
        }
        let member = syn::Member::Named(syn::Ident::new(crate::structs::ITEMS, span));
        self.field_access(e, &member, Some(k), write, span)
    }

    /// A by-value struct parameter `name: S`: a scalar parameter per scalar (named
    /// `name.field`, `name.field[k]`), and a struct value whose array fields are private
    /// arrays filled from them (statements for the top of the body).
    pub(super) fn struct_value_param(
        &mut self,
        name: &str,
        def: Rc<StructDef>,
        span: Span,
    ) -> Vec<Stmt> {
        let mut slots = Vec::new();
        let mut pre = Vec::new();
        for f in &def.fields {
            let ty = self.types.known(f.ty);
            let first = self.params.len();
            for k in 0..f.scalars() {
                // (Identifiers: the native CPU form binds parameters by name.)
                let pname = match f.len {
                    None => format!("{name}__{}", f.name),
                    Some(_) => format!("{name}__{}_{k}", f.name),
                };
                self.params.push(Param {
                    name: pname,
                    kind: ParamKind::Scalar(f.ty),
                    strukt: None,
                });
                self.param_ty.push(ty);
            }
            match f.len {
                None => slots.push(Slot::Param(first)),
                Some(len) => {
                    let gets = (0..len as usize)
                        .map(|k| Get::Param(first + k, f.ty))
                        .collect::<Vec<_>>();
                    let arr = self.hidden_array(&format!("{name}.{}", f.name), f.ty, len, false);
                    pre.extend(self.fill_array(arr, &gets, span));
                    slots.push(Slot::Array(arr));
                }
            }
        }
        let id = self.struct_values.len();
        self.struct_values.push(StructValue {
            def,
            slots,
            mutable: false,
            param: true,
            name: name.to_string(),
        });
        self.scopes[0].insert(name.to_string(), Binding::Struct(id));
        pre
    }

    /// A private array that is part of a struct value (not bound by name).
    fn hidden_array(&mut self, name: &str, ty: Ty, len: u32, mutable: bool) -> usize {
        let ty = self.types.known(ty);
        self.locals.push(Local {
            ty,
            array: Some(Array::private(len)),
            // (Filled by stores after its `let`.)
            info: LocalInfo {
                name: name.to_string(),
                mutable: true,
                user_mut: mutable,
            },
        });
        self.locals.len() - 1
    }

    /// A scalar local that is part of a struct value (not bound by name).
    fn hidden_local(&mut self, name: &str, ty: Ty, mutable: bool) -> usize {
        let ty = self.types.known(ty);
        self.locals.push(Local {
            ty,
            array: None,
            info: LocalInfo {
                name: name.to_string(),
                mutable,
                user_mut: mutable,
            },
        });
        self.locals.len() - 1
    }

    /// A compiler temporary holding `value` (evaluated once, where the statement is).
    pub(super) fn temp(&mut self, value: Expr, span: Span) -> (usize, Stmt) {
        let n = self.locals.len();
        self.locals.push(Local {
            ty: value.ty,
            array: None,
            info: LocalInfo {
                name: format!("__sycl_t{n}"),
                mutable: false,
                user_mut: false,
            },
        });
        (
            n,
            Stmt {
                kind: StmtKind::Let(n, value),
                src: At(span),
            },
        )
    }

    fn get(&mut self, g: &Get, span: Span) -> Expr {
        let ty = match *g {
            Get::Temp(l) => self.locals[l].ty,
            Get::Param(_, t) | Get::Local(_, t) | Get::ArrayItem(_, _, t) => self.types.known(t),
            Get::Slice { ty, .. } => self.types.known(ty),
        };
        let usize_lit = |p: &mut Parser, k: u32| {
            let t = p.types.known(Ty::Usize);
            Expr {
                kind: ExprKind::Lit(Lit::Int(k as u128)),
                ty: t,
                src: At(span),
            }
        };
        let kind = match *g {
            Get::Temp(l) => ExprKind::Local(l),
            Get::Param(i, _) => ExprKind::Param(i),
            Get::Local(l, _) => ExprKind::Local(l),
            Get::ArrayItem(l, k, _) => ExprKind::Load {
                base: Base::Local(l),
                check: true,
                index_fits_i32: (),
                index: Box::new(usize_lit(self, k)),
                field: None,
            },
            Get::Slice {
                param,
                index,
                ty: fty,
                offset,
                item,
            } => {
                let it = self.types.known(Ty::Usize);
                let item = item.map(|(k, len)| FieldItem {
                    len,
                    check: true,
                    index: usize_lit(self, k),
                });
                ExprKind::Load {
                    base: Base::Param(param),
                    check: true,
                    index_fits_i32: (),
                    index: Box::new(Expr {
                        kind: ExprKind::Local(index),
                        ty: it,
                        src: At(span),
                    }),
                    field: Some(Box::new(Field {
                        ty: self.types.known(fty),
                        offset,
                        item,
                    })),
                }
            }
        };
        Expr {
            kind,
            ty,
            src: At(span),
        }
    }

    /// `let arr = [g0; N]; arr[1] = g1; ..` as statements.
    pub(super) fn fill_array(&mut self, arr: usize, gets: &[Get], span: Span) -> Vec<Stmt> {
        let mut out = Vec::new();
        let first = self.get(&gets[0], span);
        out.push(Stmt {
            kind: StmtKind::Let(arr, first),
            src: At(span),
        });
        for (k, g) in gets.iter().enumerate().skip(1) {
            let value = self.get(g, span);
            out.push(Stmt {
                kind: self.store_item(arr, k, value, span),
                src: At(span),
            });
        }
        out
    }

    /// `arr` declared (at zero) and filled from the scalars `gets`: one whole-field copy where
    /// they are an array field of one slice element in order ([`StmtKind::CopyField`]), else
    /// a store per item.
    fn declare_array(&mut self, arr: usize, gets: &[Get], span: Span) -> Vec<Stmt> {
        let Some(copy) = self.copy_from_slice(arr, gets, span) else {
            return self.fill_array(arr, gets, span);
        };
        let zero = Expr {
            kind: ExprKind::Lit(Lit::Zero),
            ty: self.locals[arr].ty,
            src: At(span),
        };
        vec![
            Stmt {
                kind: StmtKind::Let(arr, zero),
                src: At(span),
            },
            copy,
        ]
    }

    /// `arr = param[t].field` as one copy, where `gets` are the items of one slice element's
    /// array field, in order, of `arr`'s length.
    fn copy_from_slice(&mut self, arr: usize, gets: &[Get], span: Span) -> Option<Stmt> {
        let Get::Slice {
            param,
            index,
            offset,
            ..
        } = *gets.first()?
        else {
            return None;
        };
        let len = gets.len() as u32;
        let run = gets.iter().enumerate().all(|(k, g)| {
            matches!(*g, Get::Slice { param: p, index: i, offset: o, item: Some((item, n)), .. }
                if p == param && i == index && o == offset && item == k as u32 && n == len)
        });
        (run && self.locals[arr].array_len() == Some(len))
            .then(|| self.copy_field(param, index, offset, arr, false, span))
    }

    /// `param[t].field = arr` as one copy, where `gets` are `arr`'s items, in order, all of
    /// them.
    fn copy_to_slice(
        &mut self,
        param: usize,
        index: usize,
        offset: u32,
        gets: &[Get],
        span: Span,
    ) -> Option<Stmt> {
        let Get::ArrayItem(arr, ..) = *gets.first()? else {
            return None;
        };
        let local = &self.locals[arr];
        let run = local.is_private_array()
            && local.array_len() == Some(gets.len() as u32)
            && gets.iter().enumerate().all(
                |(k, g)| matches!(*g, Get::ArrayItem(l, item, _) if l == arr && item == k as u32),
            );
        run.then(|| self.copy_field(param, index, offset, arr, true, span))
    }

    fn copy_field(
        &mut self,
        param: usize,
        index: usize,
        offset: u32,
        array: usize,
        to_slice: bool,
        span: Span,
    ) -> Stmt {
        let it = self.types.known(Ty::Usize);
        Stmt {
            kind: StmtKind::CopyField {
                param,
                check: true,
                index_fits_i32: (),
                index: Expr {
                    kind: ExprKind::Local(index),
                    ty: it,
                    src: At(span),
                },
                offset,
                array,
                to_slice,
            },
            src: At(span),
        }
    }

    /// `arr[k] = value;` for a literal `k`.
    fn store_item(&mut self, arr: usize, k: usize, value: Expr, span: Span) -> StmtKind {
        let it = self.types.known(Ty::Usize);
        StmtKind::Store {
            base: Base::Local(arr),
            check: true,
            index_fits_i32: (),
            op: None,
            index: Expr {
                kind: ExprKind::Lit(Lit::Int(k as u128)),
                ty: it,
                src: At(span),
            },
            value,
            field: None,
        }
    }

    /// The struct value a name is bound to, if any.
    fn struct_binding(&self, e: &syn::Expr) -> Option<usize> {
        let syn::Expr::Path(p) = strip_paren(e) else {
            return None;
        };
        match self.lookup(&p.path.get_ident()?.to_string())? {
            Binding::Struct(id) => Some(id),
            _ => None,
        }
    }

    /// `p[i]` on a struct slice: the parameter and the index expression.
    fn struct_element<'e>(
        &self,
        e: &'e syn::Expr,
    ) -> Option<(usize, &'e syn::Expr, &'e syn::Expr)> {
        let syn::Expr::Index(ix) = strip_paren(e) else {
            return None;
        };
        let syn::Expr::Path(p) = strip_paren(&ix.expr) else {
            return None;
        };
        match self.lookup(&p.path.get_ident()?.to_string())? {
            Binding::Param(i) if matches!(self.params[i].kind, ParamKind::Structs { .. }) => {
                Some((i, &ix.expr, &ix.index))
            }
            _ => None,
        }
    }

    /// A struct slice parameter named by `e`.
    pub(super) fn struct_slice(&self, e: &syn::Expr) -> Option<usize> {
        let syn::Expr::Path(p) = strip_paren(e) else {
            return None;
        };
        match self.lookup(&p.path.get_ident()?.to_string())? {
            Binding::Param(i) if matches!(self.params[i].kind, ParamKind::Structs { .. }) => {
                Some(i)
            }
            _ => None,
        }
    }

    /// `Err` unless struct slice parameter `p` (named by `slice`) is `&mut`.
    fn writable(&self, p: usize, slice: &syn::Expr) -> Result<()> {
        if matches!(
            self.params[p].kind,
            ParamKind::Structs { mutable: true, .. }
        ) {
            return Ok(());
        }
        Err(err(
            slice.span(),
            format!(
                "`{}` is `&[T]`: declare it `&mut [T]` to write it",
                self.params[p].name
            ),
        ))
    }

    fn def_of_param(&self, p: usize) -> Rc<StructDef> {
        let name = self.params[p].strukt.as_ref().expect("a struct slice");
        self.struct_def(name).expect("a known struct")
    }

    /// Whether `e` is a whole struct or array element of a slice (so that `let` and `=` copy
    /// it).
    pub(super) fn is_struct_expr(&self, e: &syn::Expr) -> bool {
        matches!(strip_paren(e), syn::Expr::Struct(_))
            || self.struct_binding(e).is_some()
            || self.struct_element(e).is_some()
    }

    /// An element access `base.member` (`field_index`: `[k]` after it) on a struct slice
    /// element or a struct value; `None` if `base` is neither. `write`: as a place.
    pub(super) fn field_access(
        &mut self,
        base: &syn::Expr,
        member: &syn::Member,
        field_index: Option<&syn::Expr>,
        write: bool,
        span: Span,
    ) -> Result<Option<(Place, TyId)>> {
        if let Some((p, slice, index)) = self.struct_element(base) {
            if write {
                self.writable(p, slice)?;
            }
            let def = self.def_of_param(p);
            let f = self.member(&def, member)?.clone();
            let index = self.index_expr(index)?;
            let item = match (f.len, field_index) {
                (None, None) => None,
                (Some(len), Some(k)) => Some(FieldItem {
                    len,
                    check: true,
                    index: self.index_expr(k)?,
                }),
                (Some(_), None) => {
                    return Err(err(
                        span,
                        format!(
                            "`{}` is an array field: index it (`.{}[k]`)",
                            f.name, f.name
                        ),
                    ))
                }
                (None, Some(k)) => {
                    return Err(err(k.span(), format!("`{}` is not an array field", f.name)))
                }
            };
            let ty = self.types.known(f.ty);
            let field = Some(Box::new(Field {
                ty,
                offset: f.offset,
                item,
            }));
            return Ok(Some((
                Place::Elem {
                    base: Base::Param(p),
                    index,
                    checked: true,
                    field,
                },
                ty,
            )));
        }
        let Some(id) = self.struct_binding(base) else {
            return Ok(None);
        };
        let v = self.struct_values[id].clone();
        if write && v.param {
            return Err(err(
                base.span(),
                format!(
                    "parameter `{}` is immutable: copy it into a `let mut` local",
                    v.name
                ),
            ));
        }
        if write && !v.mutable {
            return Err(err(
                base.span(),
                format!("`{}` is not `mut`: declare it with `let mut`", v.name),
            ));
        }
        let name = self.member(&v.def, member)?.name.clone();
        let at = v
            .def
            .fields
            .iter()
            .position(|f| f.name == name)
            .expect("a field of the struct");
        let f = &v.def.fields[at];
        let ty = self.types.known(f.ty);
        match (v.slots[at], field_index) {
            (Slot::Param(i), None) => Ok(Some((Place::Param(i), ty))),
            (Slot::Local(l), None) => Ok(Some((Place::Local(l), ty))),
            (Slot::Array(l), Some(k)) => {
                let index = self.index_expr(k)?;
                Ok(Some((
                    Place::Elem {
                        base: Base::Local(l),
                        index,
                        checked: true,
                        field: None,
                    },
                    ty,
                )))
            }
            (Slot::Array(_), None) => Err(err(
                span,
                format!(
                    "`{}` is an array field: index it (`.{}[k]`)",
                    f.name, f.name
                ),
            )),
            (_, Some(k)) => Err(err(k.span(), format!("`{}` is not an array field", f.name))),
        }
    }

    /// A whole-struct expression as a copy source.
    fn source(&mut self, e: &syn::Expr, want: Option<&Rc<StructDef>>) -> Result<Source> {
        let span = e.span();
        let src = if let Some(id) = self.struct_binding(e) {
            let v = self.struct_values[id].clone();
            let mut scalars = Vec::new();
            for (f, slot) in v.def.fields.iter().zip(&v.slots) {
                match *slot {
                    Slot::Param(i) => scalars.push(Get::Param(i, f.ty)),
                    Slot::Local(l) => scalars.push(Get::Local(l, f.ty)),
                    Slot::Array(l) => {
                        scalars.extend((0..f.scalars() as u32).map(|k| Get::ArrayItem(l, k, f.ty)))
                    }
                }
            }
            Source {
                def: v.def,
                pre: Vec::new(),
                scalars,
            }
        } else if let Some((p, _, index)) = self.struct_element(e) {
            let def = self.def_of_param(p);
            let index = self.index_expr(index)?;
            let (t, pre) = self.temp(index, span);
            let mut scalars = Vec::new();
            for f in &def.fields {
                match f.len {
                    None => scalars.push(Get::Slice {
                        param: p,
                        index: t,
                        ty: f.ty,
                        offset: f.offset,
                        item: None,
                    }),
                    Some(len) => scalars.extend((0..len).map(|k| Get::Slice {
                        param: p,
                        index: t,
                        ty: f.ty,
                        offset: f.offset,
                        item: Some((k, len)),
                    })),
                }
            }
            Source {
                def,
                pre: vec![pre],
                scalars,
            }
        } else if let syn::Expr::Struct(s) = strip_paren(e) {
            self.literal(s)?
        } else if let Some(def) = want.filter(|d| d.is_array()) {
            // An array element's value: an array list, `[v; N]`, or a private array.
            let f = def.fields[0].clone();
            let len = f.len.expect("an array");
            let mut pre = Vec::new();
            let scalars = match self.private_array_named(e) {
                Some(l) => {
                    let local = &self.locals[l];
                    if local.array_len() != Some(len) || self.types.get(local.ty) != Some(f.ty) {
                        return Err(err(
                            span,
                            format!("mismatched types: `{}` and another array", def.name),
                        ));
                    }
                    (0..len).map(|k| Get::ArrayItem(l, k, f.ty)).collect()
                }
                None => self.array_value(e, f.ty, len, &mut pre)?,
            };
            Source {
                def: def.clone(),
                pre,
                scalars,
            }
        } else {
            return Err(err(span, WHOLE));
        };
        if let Some(want) = want {
            if want.name != src.def.name {
                return Err(err(
                    span,
                    format!("mismatched types: `{}` and `{}`", want.name, src.def.name),
                ));
            }
        }
        Ok(src)
    }

    /// `S { a: x, b: [y; 3], c: q.c }`: each field's value into temporaries, in the order
    /// written (Rust's), then read in field order.
    fn literal(&mut self, s: &syn::ExprStruct) -> Result<Source> {
        let span = s.span();
        if s.qself.is_some() || s.rest.is_some() || s.dot2_token.is_some() {
            return Err(err(span, "a struct literal names every field (no `..`)"));
        }
        let name = s
            .path
            .get_ident()
            .map(|i| i.to_string())
            .ok_or_else(|| err(s.path.span(), "name the struct by its name in scope"))?;
        let def = self.struct_def(&name).ok_or_else(|| {
            err(
                s.path.span(),
                format!("`{name}` is not a struct this kernel takes: kernels build the structs of their parameters"),
            )
        })?;
        let mut per_field: Vec<Option<Vec<Get>>> = vec![None; def.fields.len()];
        let mut pre = Vec::new();
        for fv in &s.fields {
            let f = self.member(&def, &fv.member)?.clone();
            let at = def
                .fields
                .iter()
                .position(|x| x.name == f.name)
                .expect("a field");
            if per_field[at].is_some() {
                return Err(err(fv.span(), format!("field `{}` given twice", f.name)));
            }
            let gets = match f.len {
                None => {
                    let v = self.expr(&fv.expr)?;
                    self.expect_ty(&v, f.ty, "this field")?;
                    let (t, st) = self.temp(v, fv.span());
                    pre.push(st);
                    vec![Get::Local(t, f.ty)]
                }
                Some(len) => self.array_value(&fv.expr, f.ty, len, &mut pre)?,
            };
            per_field[at] = Some(gets);
        }
        let mut scalars = Vec::new();
        for (f, g) in def.fields.iter().zip(per_field) {
            scalars.extend(g.ok_or_else(|| err(span, format!("missing field `{}`", f.name)))?);
        }
        Ok(Source { def, pre, scalars })
    }

    /// An array field's value in a literal: `[a, b, c]`, `[v; N]`, or another struct's array
    /// field (`q.pos`, `p[i].pos`).
    fn array_value(
        &mut self,
        e: &syn::Expr,
        ty: Ty,
        len: u32,
        pre: &mut Vec<Stmt>,
    ) -> Result<Vec<Get>> {
        let span = e.span();
        let usage = format!(
            "an array field's value is `[a, b, ..]`, `[v; {len}]` or another struct's array field"
        );
        match strip_paren(e) {
            syn::Expr::Array(a) => {
                if a.elems.len() != len as usize {
                    return Err(err(span, format!("this array field holds {len} items")));
                }
                let mut out = Vec::new();
                for x in &a.elems {
                    let v = self.expr(x)?;
                    self.expect_ty(&v, ty, "this array field's items")?;
                    let (t, st) = self.temp(v, x.span());
                    pre.push(st);
                    out.push(Get::Local(t, ty));
                }
                Ok(out)
            }
            syn::Expr::Repeat(r) => {
                if const_usize(&r.len) != Some(len as usize) {
                    return Err(err(
                        r.len.span(),
                        format!("this array field holds {len} items"),
                    ));
                }
                let v = self.expr(&r.expr)?;
                self.expect_ty(&v, ty, "this array field's items")?;
                let (t, st) = self.temp(v, span);
                pre.push(st);
                Ok(vec![Get::Local(t, ty); len as usize])
            }
            syn::Expr::Field(f) => {
                if let Some((p, _, index)) = self.struct_element(&f.base) {
                    let def = self.def_of_param(p);
                    let fd = self.member(&def, &f.member)?.clone();
                    if fd.ty != ty || fd.len != Some(len) {
                        return Err(err(
                            span,
                            format!("mismatched types: `[{}; {len}]` and another", ty.name()),
                        ));
                    }
                    let index = self.index_expr(index)?;
                    let (t, st) = self.temp(index, span);
                    pre.push(st);
                    return Ok((0..len)
                        .map(|k| Get::Slice {
                            param: p,
                            index: t,
                            ty,
                            offset: fd.offset,
                            item: Some((k, len)),
                        })
                        .collect());
                }
                if let Some(id) = self.struct_binding(&f.base) {
                    let v = self.struct_values[id].clone();
                    let fd = self.member(&v.def, &f.member)?.clone();
                    let at = v
                        .def
                        .fields
                        .iter()
                        .position(|x| x.name == fd.name)
                        .expect("a field");
                    if fd.ty != ty || fd.len != Some(len) {
                        return Err(err(
                            span,
                            format!("mismatched types: `[{}; {len}]` and another", ty.name()),
                        ));
                    }
                    let Slot::Array(l) = v.slots[at] else {
                        unreachable!("array fields are arrays")
                    };
                    // Copied now: the literal's value is what the array holds here.
                    let mut out = Vec::new();
                    for k in 0..len {
                        let g = self.get(&Get::ArrayItem(l, k, ty), span);
                        let (t, st) = self.temp(g, span);
                        pre.push(st);
                        out.push(Get::Local(t, ty));
                    }
                    return Ok(out);
                }
                Err(err(span, usage))
            }
            _ => Err(err(span, usage)),
        }
    }

    /// The private array `e` names, if it names one.
    fn private_array_named(&self, e: &syn::Expr) -> Option<usize> {
        let syn::Expr::Path(p) = strip_paren(e) else {
            return None;
        };
        match self.lookup(&p.path.get_ident()?.to_string())? {
            Binding::Local(l) if self.locals[l].is_private_array() => Some(l),
            _ => None,
        }
    }

    /// `let [mut] name = <whole struct>;`
    pub(super) fn struct_let(
        &mut self,
        name: String,
        mutable: bool,
        annotated: Option<&syn::Type>,
        init: &syn::Expr,
    ) -> Result<Vec<Stmt>> {
        let want = match annotated {
            None => None,
            Some(t) => {
                let syn::Type::Path(p) = t else {
                    return Err(err(
                        t.span(),
                        "this `let` is a struct: annotate it with the struct's name",
                    ));
                };
                let n = p
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                Some(self.struct_def(&n).ok_or_else(|| {
                    err(t.span(), format!("`{n}` is not a struct this kernel takes"))
                })?)
            }
        };
        let span = init.span();
        let src = self.source(init, want.as_ref())?;
        let mut out = src.pre;
        // An element of a slice of arrays: a private array.
        if src.def.is_array() {
            let f = &src.def.fields[0];
            let ty = self.types.known(f.ty);
            let arr = Array::private(f.len.expect("an array"));
            let l = self.new_local(name, ty, mutable, Some(arr));
            // (Filled by stores after its `let`.)
            self.locals[l].info.mutable = true;
            out.extend(self.declare_array(l, &src.scalars, span));
            return Ok(out);
        }
        let mut slots = Vec::new();
        let mut at = 0;
        for f in &src.def.fields {
            let n = f.scalars();
            let gets = &src.scalars[at..at + n];
            at += n;
            match f.len {
                None => {
                    let l = self.hidden_local(&format!("{name}.{}", f.name), f.ty, mutable);
                    let value = self.get(&gets[0], span);
                    out.push(Stmt {
                        kind: StmtKind::Let(l, value),
                        src: At(span),
                    });
                    slots.push(Slot::Local(l));
                }
                Some(len) => {
                    let arr = self.hidden_array(&format!("{name}.{}", f.name), f.ty, len, mutable);
                    out.extend(self.declare_array(arr, gets, span));
                    slots.push(Slot::Array(arr));
                }
            }
        }
        let id = self.struct_values.len();
        self.struct_values.push(StructValue {
            def: src.def,
            slots,
            mutable,
            param: false,
            name: name.clone(),
        });
        self.scopes
            .last_mut()
            .expect("a scope")
            .insert(name, Binding::Struct(id));
        Ok(out)
    }

    /// `target = <whole struct>;` where `target` is a struct value or a struct slice's
    /// element; `None` if it is neither.
    pub(super) fn struct_assign(
        &mut self,
        target: &syn::Expr,
        value: &syn::Expr,
    ) -> Result<Option<Vec<Stmt>>> {
        let span = target.span();
        if let Some(id) = self.struct_binding(target) {
            let v = self.struct_values[id].clone();
            if v.param {
                return Err(err(
                    span,
                    format!(
                        "parameter `{}` is immutable: copy it into a `let mut` local",
                        v.name
                    ),
                ));
            }
            if !v.mutable {
                return Err(err(
                    span,
                    format!("`{}` is not `mut`: declare it with `let mut`", v.name),
                ));
            }
            let src = self.source(value, Some(&v.def))?;
            let mut out = src.pre;
            let mut at = 0;
            for (f, slot) in v.def.fields.iter().zip(&v.slots) {
                if let Slot::Array(l) = *slot {
                    let gets = &src.scalars[at..at + f.scalars()];
                    if let Some(copy) = self.copy_from_slice(l, gets, span) {
                        out.push(copy);
                        at += f.scalars();
                        continue;
                    }
                }
                for k in 0..f.scalars() {
                    let value = self.get(&src.scalars[at], span);
                    at += 1;
                    let kind = match *slot {
                        Slot::Local(l) => StmtKind::AssignLocal(l, None, value),
                        Slot::Array(l) => self.store_item(l, k, value, span),
                        Slot::Param(_) => unreachable!("parameters are not `mut`"),
                    };
                    out.push(Stmt {
                        kind,
                        src: At(span),
                    });
                }
            }
            return Ok(Some(out));
        }
        let Some((p, slice, index)) = self.struct_element(target) else {
            return Ok(None);
        };
        self.writable(p, slice)?;
        let def = self.def_of_param(p);
        // Rust's order: the value, then the place.
        let src = self.source(value, Some(&def))?;
        let mut out = src.pre;
        let index = self.index_expr(index)?;
        let (t, st) = self.temp(index, span);
        out.push(st);
        let mut at = 0;
        for f in &def.fields {
            if f.len.is_some() {
                let gets = &src.scalars[at..at + f.scalars()];
                if let Some(copy) = self.copy_to_slice(p, t, f.offset, gets, span) {
                    out.push(copy);
                    at += f.scalars();
                    continue;
                }
            }
            for k in 0..f.scalars() as u32 {
                let value = self.get(&src.scalars[at], span);
                at += 1;
                let it = self.types.known(Ty::Usize);
                let item = f.len.map(|len| FieldItem {
                    len,
                    check: true,
                    index: Expr {
                        kind: ExprKind::Lit(Lit::Int(k as u128)),
                        ty: self.types.known(Ty::Usize),
                        src: At(span),
                    },
                });
                let fty = self.types.known(f.ty);
                out.push(Stmt {
                    kind: StmtKind::Store {
                        base: Base::Param(p),
                        check: true,
                        index_fits_i32: (),
                        op: None,
                        index: Expr {
                            kind: ExprKind::Local(t),
                            ty: it,
                            src: At(span),
                        },
                        value,
                        field: Some(Box::new(Field {
                            ty: fty,
                            offset: f.offset,
                            item,
                        })),
                    },
                    src: At(span),
                });
            }
        }
        Ok(Some(out))
    }

    /// The error for a whole struct where a scalar is wanted.
    pub(super) fn whole_struct_error(&self, span: Span) -> Error {
        err(span, WHOLE)
    }
}
