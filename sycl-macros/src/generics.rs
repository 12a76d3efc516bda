//! Generic kernels: `fn saxpy<T: sycl::Float>(a: T, x: &[T], y: &mut [T])`.
//!
//! The kernel language has a closed set of element types, so the macro monomorphizes: it
//! substitutes each type a parameter's bound admits (`sycl::Float`: f32, f64, f16, bf16;
//! `sycl::Int`: i32, u32, i64, u64; `sycl::Scalar`: all eight) and translates every
//! combination like a kernel without generics, each with its own definition (built once per
//! context and cached, as any kernel's) and native CPU function. The launch type is generic
//! and picks its instance's definition by the type arguments' [`ScalarTy`]s.
//!
//! An instance that does not translate (a collective or an atomic on halves, say) is left out:
//! making its launch is a compile error (an inline `const` panics when the constructor is
//! monomorphized, so generic host code needs no bound beyond `T: sycl::Float`), whose message
//! gives the reason. If no instance translates, the first error is the kernel's, at its span.
//!
//! Const parameters (`const TILE: usize`) cannot be enumerated: each instance is encoded as a
//! template whose IR reads them ([`ExprKind::ConstParam`], an array's `len_param`), analysed
//! without their values (so its proofs hold for every value), and its native CPU form takes
//! them as const generics. The runtime instantiates the template with the launch type's
//! values, once per values (`__rt::instantiate`); array lengths out of the language's limits
//! are refused when the constructor is monomorphized.
//!
//! [`ScalarTy`]: sycl_kernel_ir::Scalar
//! [`ExprKind::ConstParam`]: sycl_kernel_ir::ExprKind::ConstParam

use std::collections::HashMap;

use proc_macro2::{Group, Ident, Span, TokenStream as TokenStream2, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::{definition_static, functor_impl, instance, KernelOptions};

/// The most instances one generic kernel may have (each is translated at build time).
const MAX_INSTANCES: usize = 64;

/// What a type parameter's bound admits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    Float,
    Int,
    Scalar,
}

impl Bound {
    fn from_path(p: &syn::Path) -> Option<Bound> {
        let last = p.segments.last()?;
        if !last.arguments.is_none() {
            return None;
        }
        // `Float`, `sycl::Float`, `sycl::kernel::Float`.
        let prefix_ok = p
            .segments
            .iter()
            .take(p.segments.len() - 1)
            .all(|s| s.ident == "sycl" || s.ident == "kernel");
        if !prefix_ok {
            return None;
        }
        match last.ident.to_string().as_str() {
            "Float" => Some(Bound::Float),
            "Int" => Some(Bound::Int),
            "Scalar" => Some(Bound::Scalar),
            _ => None,
        }
    }

    /// The admitted types' names, in the order instances are made.
    fn types(self) -> &'static [&'static str] {
        match self {
            Bound::Float => &["f32", "f64", "f16", "bf16"],
            Bound::Int => &["i32", "u32", "i64", "u64"],
            Bound::Scalar => &["i32", "u32", "i64", "u64", "f32", "f64", "f16", "bf16"],
        }
    }
}

/// A type's tokens, spanned at the parameter it replaces.
fn type_tokens(name: &str, span: Span) -> TokenStream2 {
    match name {
        "f16" => quote_spanned!(span=> ::sycl::half::f16),
        "bf16" => quote_spanned!(span=> ::sycl::half::bf16),
        other => {
            let id = Ident::new(other, span);
            quote!(#id)
        }
    }
}

/// `tokens` with each identifier in `map` replaced by its type (spanned where it stood).
fn substitute(tokens: TokenStream2, map: &HashMap<String, &str>) -> TokenStream2 {
    tokens
        .into_iter()
        .flat_map(|t| -> Vec<TokenTree> {
            match t {
                TokenTree::Ident(id) => match map.get(&id.to_string()) {
                    Some(name) => type_tokens(name, id.span()).into_iter().collect(),
                    None => vec![TokenTree::Ident(id)],
                },
                TokenTree::Group(g) => {
                    let mut ng = Group::new(g.delimiter(), substitute(g.stream(), map));
                    ng.set_span(g.span());
                    vec![TokenTree::Group(ng)]
                }
                other => vec![other],
            }
        })
        .collect()
}

fn err(span: Span, msg: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, msg)
}

/// The type parameters and what each admits; anything else a generic kernel may not have is
/// an error at its span.
fn type_params(g: &syn::Generics) -> syn::Result<Vec<(Ident, Bound)>> {
    if let Some(w) = &g.where_clause {
        return Err(err(
            w.span(),
            "a generic kernel bounds its parameters in place (`T: sycl::Float`), without `where`",
        ));
    }
    let usage = "a kernel's type parameter has one bound: `sycl::Float` (f32, f64, f16, bf16), `sycl::Int` (i32, u32, i64, u64) or `sycl::Scalar` (all of them)";
    let mut out = Vec::new();
    for p in &g.params {
        match p {
            syn::GenericParam::Type(t) => {
                if t.default.is_some() {
                    return Err(err(t.span(), "a kernel's type parameter has no default"));
                }
                let bounds: Vec<_> = t.bounds.iter().collect();
                let [syn::TypeParamBound::Trait(tb)] = bounds[..] else {
                    return Err(err(t.span(), usage));
                };
                if tb.lifetimes.is_some() || !matches!(tb.modifier, syn::TraitBoundModifier::None) {
                    return Err(err(tb.span(), usage));
                }
                let b = Bound::from_path(&tb.path).ok_or_else(|| err(tb.span(), usage))?;
                out.push((t.ident.clone(), b));
            }
            syn::GenericParam::Lifetime(l) => {
                return Err(err(l.span(), "kernels take no lifetime parameters"))
            }
            // Checked by the parser; instances keep them (the runtime instantiates).
            syn::GenericParam::Const(_) => {}
        }
    }
    Ok(out)
}

/// Every combination of the parameters' types.
fn combinations(params: &[(Ident, Bound)]) -> Vec<Vec<&'static str>> {
    let mut out = vec![Vec::new()];
    for (_, b) in params {
        out = out
            .into_iter()
            .flat_map(|c| {
                b.types().iter().map(move |t| {
                    let mut c = c.clone();
                    c.push(*t);
                    c
                })
            })
            .collect();
    }
    out
}

/// `#[sycl::kernel]` on a generic function.
pub fn kernel(
    item: syn::ItemFn,
    options: KernelOptions,
    structs: &crate::structs::Known,
) -> syn::Result<TokenStream2> {
    let params = type_params(&item.sig.generics)?;
    let combos = combinations(&params);
    if combos.len() > MAX_INSTANCES {
        return Err(err(
            item.sig.generics.span(),
            format!(
                "this kernel has {} instances (every combination of its parameters' types); at most {MAX_INSTANCES}: narrow a bound",
                combos.len()
            ),
        ));
    }
    let name = &item.sig.ident;
    // Each instance keeps the const parameters.
    let mut plain = item.clone();
    plain.sig.generics.params = item
        .sig
        .generics
        .params
        .iter()
        .filter(|p| matches!(p, syn::GenericParam::Const(_)))
        .cloned()
        .collect();
    let plain_tokens = quote!(#plain);

    let mut built = Vec::new();
    let mut failed: Vec<(&Vec<&str>, String, syn::Error)> = Vec::new();
    for (k, combo) in combos.iter().enumerate() {
        let map: HashMap<String, &str> = params
            .iter()
            .zip(combo)
            .map(|((id, _), t)| (id.to_string(), *t))
            .collect();
        let shown = format!("{name}::<{}>", combo.join(", "));
        let one: syn::ItemFn = syn::parse2(substitute(plain_tokens.clone(), &map))?;
        let cpu_name = format_ident!("__sycl_cpu_{}_{}", name, k);
        match instance(&one, &options, &cpu_name, structs) {
            Ok(inst) => built.push((combo, inst)),
            Err(e) => failed.push((combo, shown, e)),
        }
    }
    if built.is_empty() {
        // The first instance's errors, each saying which instance it is.
        let (_, shown, e) = failed.swap_remove(0);
        if params.is_empty() {
            // Only const parameters: one instance, the kernel itself.
            return Err(e);
        }
        let mut all: Option<syn::Error> = None;
        for one in e {
            let one = err(one.span(), format!("in `{shown}`: {one}"));
            match &mut all {
                Some(a) => a.combine(one),
                None => all = Some(one),
            }
        }
        return Err(all.expect("an error"));
    }

    let vis = &item.vis;
    let attrs = &item.attrs;
    let tys: Vec<&Ident> = params.iter().map(|(id, _)| id).collect();
    let generics = &item.sig.generics;
    let tuple = quote!((#(#tys,)*));

    // The constructor, from the signature as written (its types name the parameters).
    let (ctor_params, ctor_args) = crate::constructor(&built[0].1, &item)?;

    let cpus = built.iter().map(|(_, inst)| &inst.cpu);
    // The type arguments as scalar types, matched against each instance's.
    let scalar = quote!(::sycl::kernel::__rt::ScalarTy);
    let key = quote!((#(<#tys as ::sycl::kernel::__rt::Scalar>::TY,)*));
    let pattern = |combo: &[&str]| {
        let vs = combo.iter().map(|t| {
            let v = format_ident!(
                "{}",
                match *t {
                    "i32" => "I32",
                    "u32" => "U32",
                    "i64" => "I64",
                    "u64" => "U64",
                    "f32" => "F32",
                    "f64" => "F64",
                    "f16" => "F16",
                    _ => "Bf16",
                }
            );
            quote!(#scalar::#v)
        });
        quote!((#(#vs,)*))
    };
    let arms = built.iter().map(|(combo, inst)| {
        let pat = pattern(combo);
        if inst.consts.is_empty() {
            let definition = definition_static(&inst.parts);
            return quote!(#pat => { #definition });
        }
        // A template, instantiated with the const arguments.
        let parts = &inst.parts;
        let entry = &inst.entry;
        let values = inst.consts.iter().map(|(n, _)| {
            let c = format_ident!("{}", n);
            quote!(#c as u64)
        });
        quote!(#pat => {
            #[allow(unsafe_code)]
            // SAFETY: the sources below are #[sycl::kernel]'s translation of this kernel (a
            // template: its native CPU form is `entry`, given at instantiation).
            static TEMPLATE: ::sycl::kernel::__rt::Definition = unsafe {
                ::sycl::kernel::__rt::Definition::new(#parts)
            };
            ::sycl::kernel::__rt::instantiate(&TEMPLATE, &[#(#values),*], #entry)
        })
    });
    // Arrays whose length is a const parameter: 1 to the language's limit.
    let mut len_checks: Vec<(usize, u32, String)> = Vec::new();
    for (_, inst) in &built {
        for c in &inst.len_checks {
            if !len_checks.contains(c) {
                len_checks.push(c.clone());
            }
        }
    }
    let consts = built[0].1.consts.clone();
    let len_refusals = len_checks.iter().map(|(p, max, what)| {
        let c = format_ident!("{}", consts[*p].0);
        let msg = format!(
            "kernel `{name}`: `{}` is the length of {what}: 1 to {max}",
            consts[*p].0
        );
        quote!(if (#c as u64) == 0 || (#c as u64) > #max as u64 { ::core::panic!(#msg) })
    });
    // A left-out instance is a compile error where it is made (after monomorphization, so
    // generic host code needs no bound beyond the kernel's own).
    let refusals = failed.iter().map(|(combo, shown, e)| {
        let pat = pattern(combo);
        let msg = format!("kernel `{shown}` is not in the kernel language: {e}");
        quote!(if matches!(#key, #pat) {
            ::core::panic!(#msg)
        })
    });
    // Without type parameters the one arm matches `()`.
    let fallback = if params.is_empty() {
        quote!()
    } else {
        quote!(_ => ::core::unreachable!("the constructor refuses types without an instance"),)
    };
    let doc_launch = format!(
        "A launch of the generic kernel `{name}` for [`sycl::Queue::parallel_for`]; made by the function `{name}`."
    );
    // Every generic parameter as the struct declares it, as the impls bound it, and as an
    // argument (a const one braced: a bare name in a generic argument is read as a type).
    let mut decls = Vec::new();
    let mut bounds = Vec::new();
    let mut args = Vec::new();
    for p in &item.sig.generics.params {
        match p {
            syn::GenericParam::Const(c) => {
                let (id, ty) = (&c.ident, &c.ty);
                decls.push(quote!(const #id: #ty));
                bounds.push(quote!(const #id: #ty));
                args.push(quote!({ #id }));
            }
            syn::GenericParam::Type(t) => {
                let id = &t.ident;
                decls.push(quote!(#id));
                bounds.push(quote!(#id: ::sycl::kernel::Scalar));
                args.push(quote!(#id));
            }
            syn::GenericParam::Lifetime(_) => unreachable!("refused above"),
        }
    }
    let functor = functor_impl(quote!(<#(#bounds),*>), quote!(#name<#(#args),*>));
    Ok(quote! {
        #[doc = #doc_launch]
        #[allow(non_camel_case_types)]
        #vis struct #name<#(#decls),*> {
            #[doc(hidden)]
            pub __sycl_args: ::sycl::kernel::__rt::Args,
            #[allow(dead_code)]
            __sycl_types: ::core::marker::PhantomData<fn() -> #tuple>,
        }

        #(#attrs)*
        #[allow(non_snake_case, clippy::too_many_arguments)]
        #[must_use = "a kernel launch does nothing until it is passed to `Queue::parallel_for`"]
        #vis fn #name #generics (#(#ctor_params),*) -> #name<#(#args),*> {
            const {
                #(#refusals)*
                #(#len_refusals)*
            }
            #name {
                __sycl_args: ::sycl::kernel::__rt::Args::new(::std::vec![#(#ctor_args),*]),
                __sycl_types: ::core::marker::PhantomData,
            }
        }

        const _: () = {
            #(#cpus)*

            impl<#(#bounds),*> ::sycl::kernel::__rt::GeneratedKernel for #name<#(#args),*> {
                fn definition() -> &'static ::sycl::kernel::__rt::Definition {
                    match #key {
                        #(#arms)*
                        #fallback
                    }
                }
            }

            #functor
        };
    })
}

/// `#[sycl::kernel_fn]` on a generic function: `fn dot<T: sycl::Float>(a: &[T], b: &[T]) -> T`.
///
/// One type parameter. Each type its bound admits is substituted and translated like a
/// helper without generics: its native function (`__sycl_h_<name>_<type>`, hidden) and its
/// definition, which `KernelFn<fn(&'static [f32], &'static [f32]) -> f32>` returns (a kernel's
/// call names the instance for the types it passes; a type no instance takes is a compile
/// error there). The function users call is generic: it calls the instance through a hidden
/// trait implemented for each type. An instance that does not translate is left out.
pub fn helper(item: syn::ItemFn, structs: &crate::structs::Known) -> syn::Result<TokenStream2> {
    let params = type_params(&item.sig.generics)?;
    if item
        .sig
        .generics
        .params
        .iter()
        .any(|p| matches!(p, syn::GenericParam::Const(_)))
    {
        return Err(err(
            item.sig.generics.span(),
            "kernel helpers have no const parameters (yet): pass the value",
        ));
    }
    let [(t, bound)] = &params[..] else {
        return Err(err(
            item.sig.generics.span(),
            "a generic kernel helper has one type parameter",
        ));
    };
    let name = &item.sig.ident;
    let vis = &item.vis;
    let mut plain = item.clone();
    plain.sig.generics = syn::Generics::default();
    plain.attrs = vec![syn::parse_quote!(#[doc(hidden)])];
    let mut instances = Vec::new();
    let mut first_error = None;
    for ty in bound.types() {
        let map: HashMap<String, &str> = [(t.to_string(), *ty)].into_iter().collect();
        let mut one: syn::ItemFn = syn::parse2(substitute(quote!(#plain), &map))?;
        let inst = format_ident!("__sycl_h_{}_{}", name, ty);
        one.sig.ident = inst.clone();
        match crate::helper_instance(&one, &format!("{name}::<{ty}>"), structs) {
            Ok((rust, definition)) => instances.push((*ty, inst, rust, definition)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if instances.is_empty() {
        return Err(first_error.expect("an instance failed"));
    }

    // The signature as written, slices generic over `SliceRef`/`SliceMutRef` (host code
    // passes `[T]` or `Vec<T>`, kernels their slices), for the function and the trait.
    let rt = quote!(::sycl::kernel::__rt);
    let mut slice_generics = Vec::new();
    let mut inputs = Vec::new();
    let mut args = Vec::new();
    for (i, input) in item.sig.inputs.iter().enumerate() {
        let syn::FnArg::Typed(pt) = input else {
            return Err(err(input.span(), "kernel helpers take no `self`"));
        };
        let pat = &pt.pat;
        let ident = match &*pt.pat {
            syn::Pat::Ident(pi) => pi.ident.clone(),
            other => return Err(err(other.span(), "a helper parameter is a plain name")),
        };
        args.push(ident);
        match &*pt.ty {
            syn::Type::Reference(r) => {
                let syn::Type::Slice(s) = &*r.elem else {
                    return Err(err(r.span(), "a reference parameter is a slice"));
                };
                let elem = &s.elem;
                let g = format_ident!("__SyclS{}", i);
                if r.mutability.is_some() {
                    slice_generics.push(quote!(#g: #rt::SliceMutRef<#elem> + ?Sized));
                    inputs.push(quote!(#pat: &mut #g));
                } else {
                    slice_generics.push(quote!(#g: #rt::SliceRef<#elem> + ?Sized));
                    inputs.push(quote!(#pat: &#g));
                }
            }
            ty => inputs.push(quote!(#pat: #ty)),
        }
    }
    let ret = match &item.sig.output {
        syn::ReturnType::Type(_, ty) => quote!(#ty),
        syn::ReturnType::Default => quote!(()),
    };
    let to_self: HashMap<String, &str> = [(t.to_string(), "Self")].into_iter().collect();
    let self_sig = substitute(
        quote!(fn __call<#(#slice_generics),*>(#(#inputs),*) -> #ret),
        &to_self,
    );
    let trait_name = format_ident!("__SyclHelper_{}", name);
    let impls = instances.iter().map(|(ty, inst, _, _)| {
        let map: HashMap<String, &str> = [(t.to_string(), *ty)].into_iter().collect();
        let sig = substitute(
            quote!(fn __call<#(#slice_generics),*>(#(#inputs),*) -> #ret),
            &map,
        );
        let ty = type_tokens(ty, Span::call_site());
        quote! {
            impl #trait_name for #ty {
                #[inline(always)]
                #sig {
                    #inst(#(#args),*)
                }
            }
        }
    });
    let rusts = instances.iter().map(|(_, _, rust, _)| rust);
    // Each instance's definition, under its call types.
    let definitions = instances.iter().map(|(ty, _, _, definition)| {
        let map: HashMap<String, &str> = [(t.to_string(), *ty)].into_iter().collect();
        let key_args = item.sig.inputs.iter().map(|input| {
            let syn::FnArg::Typed(pt) = input else {
                unreachable!("checked above")
            };
            match &*pt.ty {
                syn::Type::Reference(r) => match &*r.elem {
                    syn::Type::Slice(s) => {
                        let e = &s.elem;
                        quote!(&'static [#e])
                    }
                    other => quote!(#other),
                },
                other => quote!(#other),
            }
        });
        let key = substitute(quote!(fn(#(#key_args),*) -> #ret), &map);
        quote! {
            impl #rt::KernelFn<#key> for #name {
                fn definition() -> &'static #rt::HelperDef {
                    #definition
                }
            }
        }
    });
    let attrs = &item.attrs;
    let bound_path = &item
        .sig
        .generics
        .type_params()
        .next()
        .expect("one type parameter")
        .bounds;
    Ok(quote! {
        #(#rusts)*

        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis trait #trait_name: #rt::Element {
            #self_sig;
        }
        #(#impls)*

        #(#attrs)*
        #[allow(clippy::too_many_arguments)]
        #vis fn #name<#t: #bound_path + #trait_name, #(#slice_generics),*>(#(#inputs),*) -> #ret {
            <#t as #trait_name>::__call(#(#args),*)
        }

        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis struct #name {}

        const _: () = {
            #(#definitions)*
        };
    })
}
