//! `#[sycl::kernel]` and `#[sycl::kernel_fn]`: one Rust function, compiled to the native CPU
//! (as Rust), CUDA C++ (for NVRTC) and OpenCL C. Use them through the `sycl` crate, which
//! documents the kernel language; spec/kernels.md describes the translation.
//!
//! The pipeline: [`parse`] checks the function against the kernel language and infers its
//! types; [`analyze`] finds where the work-group synchronises and what the kernel needs of a
//! device; [`bounds`] proves accesses in bounds, once per kernel; [`emit_rust`] writes the
//! native CPU form; [`encode`] lowers the checked function, with the proofs, to the shared IR
//! (`sycl-kernel-ir`) and writes it as words, from which the runtime prints and builds every
//! device form (CUDA C++, OpenCL C, SPIR-V).

// The links above name private modules: this crate's documentation is for its contributors
// (`cargo doc --document-private-items`); users read the `sycl` crate's.
#![allow(rustdoc::private_intra_doc_links)]

use proc_macro::TokenStream;
use proc_macro2::{Literal, TokenStream as TokenStream2};
use quote::{format_ident, quote};

mod analyze;
mod bounds;
mod emit_rust;
mod encode;
mod generics;
mod ir;
mod parse;
mod structs;

use ir::{ParamKind, SigParam, Ty};

/// Makes a function a kernel for every device. See `sycl::kernel`.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = TokenStream2::from(attr);
    let options = match kernel_options(&attr) {
        Ok(options) => options,
        Err(e) => return e.to_compile_error().into(),
    };
    match syn::parse::<syn::ItemFn>(item) {
        Ok(func) => with_structs(func, options, attr, &[])
            .unwrap_or_else(|e| e.to_compile_error())
            .into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The options a `#[sycl::kernel(..)]` attribute's tokens give: `reqd_work_group_size(x)`,
/// `(x, y)` or `(x, y, z)`, and `__no_proofs` (testing only, undocumented for users: every
/// access stays checked and every code form general, the twin the differential test compares
/// each kernel with).
fn kernel_options(attr: &TokenStream2) -> syn::Result<KernelOptions> {
    use syn::punctuated::Punctuated;
    let mut options = KernelOptions {
        proofs: true,
        work_group_size: None,
    };
    let args = syn::parse::Parser::parse2(
        Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
        attr.clone(),
    )?;
    for arg in args {
        match &arg {
            syn::Meta::Path(p) if p.is_ident("__no_proofs") && options.proofs => {
                options.proofs = false
            }
            syn::Meta::List(list)
                if list.path.is_ident("reqd_work_group_size")
                    && options.work_group_size.is_none() =>
            {
                let sizes = list
                    .parse_args_with(Punctuated::<syn::LitInt, syn::Token![,]>::parse_terminated)?;
                if sizes.is_empty() || sizes.len() > 3 {
                    return Err(syn::Error::new_spanned(
                        list,
                        "`reqd_work_group_size` takes one to three sizes, in the order of `Range::with_local`",
                    ));
                }
                let mut size = [1usize; 3];
                for (d, s) in sizes.iter().enumerate() {
                    size[d] = s.base10_parse()?;
                    if size[d] == 0 {
                        return Err(syn::Error::new_spanned(s, "a work-group size is at least 1"));
                    }
                }
                options.work_group_size = Some(size);
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    &arg,
                    "#[sycl::kernel] takes one argument, once: `reqd_work_group_size(x)`, `(x, y)` or `(x, y, z)`",
                ))
            }
        }
    }
    Ok(options)
}

/// Translates a kernel once every struct its signature names has a layout; before that,
/// asks the first unknown one for its layout (`structs`), which calls
/// [`__kernel_with_types`] back.
fn with_structs(
    func: syn::ItemFn,
    options: KernelOptions,
    attr: TokenStream2,
    layouts: &[(syn::Ident, syn::FieldsNamed)],
) -> syn::Result<TokenStream2> {
    let known = structs::known(layouts)?;
    let missing = structs::named_structs(&func)
        .into_iter()
        .find(|(n, _)| !known.contains_key(n));
    match missing {
        Some((name, span)) => Ok(structs::ask(&name, span, layouts, &attr, &func)),
        None => kernel_impl(func, options, &known),
    }
}

/// `#[derive(sycl::KernelType)]`: a `#[repr(C)]` struct kernels take by value and in slices.
/// See `sycl::KernelType`.
#[proc_macro_derive(KernelType)]
pub fn derive_kernel_type(item: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(item) {
        Ok(item) => structs::derive(item)
            .unwrap_or_else(|e| e.to_compile_error())
            .into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// A kernel with the layouts of structs it names, from their derives' macros (not for users).
#[doc(hidden)]
#[proc_macro]
pub fn __kernel_with_types(input: TokenStream) -> TokenStream {
    let run = || -> syn::Result<TokenStream2> {
        let w: structs::WithTypes = syn::parse(input)?;
        let options = kernel_options(&w.attr)?;
        let func: syn::ItemFn = syn::parse2(w.item)?;
        with_structs(func, options, w.attr, &w.layouts)
    };
    run().unwrap_or_else(|e| e.to_compile_error()).into()
}

/// Makes a function callable from kernels (and from host code). See `sycl::kernel`.
#[proc_macro_attribute]
pub fn kernel_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = TokenStream2::from(attr);
    if !attr.is_empty() {
        return no_arguments(attr);
    }
    match syn::parse::<syn::ItemFn>(item) {
        Ok(func) => helper_impl(func, &structs::Known::new())
            .unwrap_or_else(|e| e.to_compile_error())
            .into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn no_arguments(attr: TokenStream2) -> TokenStream {
    syn::Error::new_spanned(attr, "this attribute takes no arguments")
        .to_compile_error()
        .into()
}

/// What `#[sycl::kernel(..)]` was given.
struct KernelOptions {
    /// Use the bounds analysis' proofs (off only for the differential test's twins).
    proofs: bool,
    /// The work-group size every launch must have (`reqd_work_group_size`), unused
    /// dimensions 1.
    work_group_size: Option<[usize; 3]>,
}

fn scalar_ty(t: Ty) -> TokenStream2 {
    let v = format_ident!(
        "{}",
        match t {
            Ty::Bool => "Bool",
            Ty::I32 => "I32",
            Ty::U32 => "U32",
            Ty::I64 => "I64",
            Ty::U64 => "U64",
            Ty::Usize => "Usize",
            Ty::F32 => "F32",
            Ty::F64 => "F64",
            Ty::F16 => "F16",
            Ty::Bf16 => "Bf16",
        }
    );
    quote!(::sycl::kernel::__rt::ScalarTy::#v)
}

/// Encoded words as a `&'static [u32]` expression: a byte string in a `Wire` static (one
/// token, where a slice literal is an expression per word).
fn words(w: &[u32]) -> TokenStream2 {
    if w.is_empty() {
        return quote!(&[]);
    }
    let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    let len = Literal::usize_unsuffixed(bytes.len());
    let bytes = Literal::byte_string(&bytes);
    quote!({
        static WIRE: ::sycl::kernel::__rt::Wire<#len> =
            ::sycl::kernel::__rt::Wire::from_le_bytes(*#bytes);
        WIRE.words()
    })
}

/// The callees' definitions, each the instance for the types it is called with (any for a
/// helper that is not generic).
fn helper_refs(helpers: &[(syn::Path, ir::CallKey)]) -> TokenStream2 {
    let refs = helpers.iter().map(|(p, key)| {
        let key = key.type_tokens();
        quote!(<#p as ::sycl::kernel::__rt::KernelFn<#key>>::definition)
    });
    quote!(&[#(#refs as fn() -> &'static ::sycl::kernel::__rt::HelperDef),*])
}

/// One kernel translated for concrete types: its `DefinitionParts` expression, its native CPU
/// function, and its parameters as the macro read them.
struct Instance {
    parts: TokenStream2,
    cpu: TokenStream2,
    params: Vec<ParamKind>,
    /// The signature's parameters as IR parameters.
    signature: Vec<SigParam>,
    /// Its const generic parameters' names (as written) and types; with any, `parts` is a
    /// template (`CpuEntry::Template`), which `entry` instantiates.
    consts: Vec<(String, Ty)>,
    /// The native CPU entry, generic arguments given as the const parameters' names.
    entry: TokenStream2,
    /// Arrays whose length is a const parameter: the parameter, the length's limit, and
    /// what the array is.
    len_checks: Vec<(usize, u32, String)>,
}

/// Translates a kernel without generic parameters (a generic kernel's instance has its types
/// substituted); the native CPU function is named `cpu_name`.
fn instance(
    item: &syn::ItemFn,
    options: &KernelOptions,
    cpu_name: &proc_macro2::Ident,
    structs: &structs::Known,
) -> syn::Result<Instance> {
    let f = parse::function(item, parse::Role::Kernel, structs)?;
    let consts = parse::const_params(&item.sig.generics)?;
    let mut an = analyze::kernel(&f)?;
    if let Some(size) = options.work_group_size {
        an.info.required_local = size;
    }
    // The kernel's one bounds analysis: every form reads its proofs.
    let bounds = if options.proofs {
        bounds::Bounds::new(&f)
    } else {
        bounds::Bounds::new(&f).without_proofs()
    };
    let checked = encode::checked(&f, an.info.group.then_some(&an.steps[..]), &bounds, true);
    let ir = encode::resolved(&checked, &an.helpers);
    // The native CPU form drops exactly the checks of accesses proved under a guard.
    let guard = words(&sycl_kernel_ir::wire::encode_guards(&ir.access_guards()));
    let ir = words(&sycl_kernel_ir::wire::encode(&ir));
    let const_tys: Vec<Ty> = consts.iter().map(|(_, t)| *t).collect();
    let cpu = emit_rust::kernel_cpu(&checked, &f.params, &an, cpu_name, &const_tys);
    // Braced: a bare name in a generic argument is read as a type first.
    let const_args = consts.iter().map(|(n, _)| {
        let c = format_ident!("{}", n);
        quote!({ #c })
    });
    let entry = if an.info.group {
        quote!(::sycl::kernel::__rt::CpuEntry::Groups(#cpu_name::<#(#const_args),*>))
    } else {
        quote!(::sycl::kernel::__rt::CpuEntry::Items(#cpu_name::<#(#const_args),*>))
    };
    let cpu_entry = if consts.is_empty() {
        entry.clone()
    } else {
        quote!(::sycl::kernel::__rt::CpuEntry::Template)
    };
    let len_checks = f
        .locals
        .iter()
        .filter_map(|l| {
            let a = l.array?;
            let p = a.len_param?;
            let (max, what) = if a.is_work_group() {
                (sycl_kernel_ir::validate::MAX_LOCAL_ARRAY, "local array")
            } else {
                (sycl_kernel_ir::validate::MAX_PRIVATE_ARRAY, "private array")
            };
            Some((p, max, format!("{what} `{}`", l.info.name)))
        })
        .collect();
    let specs = f.params.iter().map(|p| match p.kind {
        ParamKind::Scalar(t) => {
            let st = scalar_ty(t);
            quote!(::sycl::kernel::__rt::ParamSpec::Scalar(#st))
        }
        ParamKind::Slice { elem, mutable } => {
            let st = scalar_ty(elem);
            quote!(::sycl::kernel::__rt::ParamSpec::Slice { elem: #st, mutable: #mutable })
        }
        ParamKind::Structs { size, mutable } => {
            // The element type as the kernel names it (a struct, or `[f32; 4]`): its derive
            // (or the arrays' impl) computed the parts key from the same layout.
            let mut elem: syn::Type = syn::parse_str(
                p.strukt
                    .as_deref()
                    .expect("a struct slice names its element"),
            )
            .expect("a type");
            // An array of halves is named `[bf16; 8]`: its items through sycl's re-export.
            if let syn::Type::Array(a) = &mut elem {
                if let Some(t) = parse::scalar_ty(&a.elem) {
                    let t = emit_rust::ty_tokens(t);
                    *a.elem = syn::parse_quote!(#t);
                }
            }
            quote!(::sycl::kernel::__rt::ParamSpec::Structs {
                size: #size,
                parts: <#elem as ::sycl::KernelType>::__SYCL_PARTS,
                mutable: #mutable,
            })
        }
    });
    let name_str = item.sig.ident.to_string();
    let helpers = helper_refs(&an.helpers);
    let dims = Literal::u8_unsuffixed(an.info.dims);
    let (group, nd, fp64, atomic64) = (
        an.info.group,
        an.info.nd_queries,
        an.info.fp64,
        an.info.atomic64,
    );
    let sub_groups = an.info.sub_groups;
    let (memory_orders, memory_scopes) = (
        Literal::u8_unsuffixed(an.info.memory_orders),
        Literal::u8_unsuffixed(an.info.memory_scopes),
    );
    let reduce_bytes = Literal::usize_unsuffixed(an.info.reduce_bytes);
    let local_bytes = Literal::usize_unsuffixed(an.info.local_bytes);
    let required_local = an.info.required_local.map(Literal::usize_unsuffixed);
    let parts = quote! {
        ::sycl::kernel::__rt::DefinitionParts {
            name: #name_str,
            params: &[#(#specs),*],
            guard: #guard,
            ir: #ir,
            helpers: #helpers,
            info: ::sycl::kernel::__rt::KernelInfo {
                dims: #dims,
                group: #group,
                nd_queries: #nd,
                fp64: #fp64,
                atomic64: #atomic64,
                memory_orders: #memory_orders,
                memory_scopes: #memory_scopes,
                sub_groups: #sub_groups,
                reduce_bytes: #reduce_bytes,
                local_bytes: #local_bytes,
                required_local: [#(#required_local),*],
            },
            cpu: #cpu_entry,
        }
    };
    Ok(Instance {
        parts,
        cpu,
        params: f.params.iter().map(|p| p.kind).collect(),
        signature: f.signature.clone(),
        consts,
        entry,
        len_checks,
    })
}

/// A `static` definition from an instance's parts, as a function body.
fn definition_static(parts: &TokenStream2) -> TokenStream2 {
    quote! {
        #[allow(unsafe_code)]
        // SAFETY: the sources below are #[sycl::kernel]'s translation of this kernel, as is
        // the CPU function.
        static DEFINITION: ::sycl::kernel::__rt::Definition = unsafe {
            ::sycl::kernel::__rt::Definition::new(#parts)
        };
        &DEFINITION
    }
}

fn kernel_impl(
    item: syn::ItemFn,
    options: KernelOptions,
    structs: &structs::Known,
) -> syn::Result<TokenStream2> {
    if !item.sig.generics.params.is_empty() || item.sig.generics.where_clause.is_some() {
        return generics::kernel(item, options, structs);
    }
    let name = &item.sig.ident;
    let cpu_name = format_ident!("__sycl_cpu_{}", name);
    let inst = instance(&item, &options, &cpu_name, structs)?;
    let vis = &item.vis;
    let attrs = &item.attrs;
    let (ctor_params, ctor_args) = constructor(&inst, &item)?;
    let doc_launch = format!(
        "A launch of kernel `{name}` for [`sycl::Queue::parallel_for`]; made by the function `{name}`."
    );
    let cpu = &inst.cpu;
    let definition = definition_static(&inst.parts);
    let functor = functor_impl(quote!(), quote!(#name));
    Ok(quote! {
        #[doc = #doc_launch]
        #[allow(non_camel_case_types)]
        #vis struct #name {
            #[doc(hidden)]
            pub __sycl_args: ::sycl::kernel::__rt::Args,
        }

        #(#attrs)*
        #[allow(non_snake_case, clippy::too_many_arguments)]
        #[must_use = "a kernel launch does nothing until it is passed to `Queue::parallel_for`"]
        #vis fn #name(#(#ctor_params),*) -> #name {
            #name {
                __sycl_args: ::sycl::kernel::__rt::Args::new(::std::vec![#(#ctor_args),*]),
            }
        }

        const _: () = {
            #cpu

            impl ::sycl::kernel::__rt::GeneratedKernel for #name {
                fn definition() -> &'static ::sycl::kernel::__rt::Definition {
                    #definition
                }
            }

            #functor
        };
    })
}

/// The launch constructor's parameters and the argument list it builds, from the signature as
/// written (its types name the parameters: a generic kernel's are its type parameters).
fn constructor(
    inst: &Instance,
    item: &syn::ItemFn,
) -> syn::Result<(Vec<TokenStream2>, Vec<TokenStream2>)> {
    let rt = quote!(::sycl::kernel::__rt);
    let mut ctor_params = Vec::new();
    let mut ctor_args = Vec::new();
    for (sig, input) in inst.signature.iter().zip(&item.sig.inputs) {
        let syn::FnArg::Typed(pt) = input else {
            unreachable!("the parser refused `self`")
        };
        let pat = &pt.pat;
        let ty = &pt.ty;
        let slice_elem = || match &**ty {
            syn::Type::Reference(r) => match &*r.elem {
                syn::Type::Slice(s) => Ok(&s.elem),
                other => Err(syn::Error::new_spanned(
                    other,
                    "a slice parameter is `&[T]` or `&mut [T]`",
                )),
            },
            other => Err(syn::Error::new_spanned(
                other,
                "a slice parameter is `&[T]` or `&mut [T]`",
            )),
        };
        match sig {
            SigParam::Plain(i) => match inst.params[*i] {
                ParamKind::Scalar(_) => {
                    ctor_params.push(quote!(#pat: #ty));
                    ctor_args.push(quote!(#rt::ArgValue::scalar::<#ty>(#pat)));
                }
                ParamKind::Slice { mutable, .. } => {
                    let elem = slice_elem()?;
                    ctor_params.push(quote!(#pat: &impl ::sycl::AsUsmRange<#elem>));
                    ctor_args.push(quote!(#rt::ArgValue::slice::<#elem>(#pat, #mutable)));
                }
                ParamKind::Structs { mutable, .. } => {
                    let elem = slice_elem()?;
                    ctor_params.push(quote!(#pat: &impl ::sycl::AsUsmRange<#elem>));
                    ctor_args.push(quote!(#rt::ArgValue::structs::<#elem>(#pat, #mutable)));
                }
            },
            SigParam::Struct { def, .. } => {
                ctor_params.push(quote!(#pat: #ty));
                for f in &def.fields {
                    let field = format_ident!("{}", f.name);
                    let t = emit_rust::ty_tokens(f.ty);
                    match f.len {
                        None => ctor_args.push(quote!(#rt::ArgValue::scalar::<#t>(#pat.#field))),
                        Some(len) => ctor_args.extend(
                            (0..len as usize)
                                .map(|k| quote!(#rt::ArgValue::scalar::<#t>(#pat.#field[#k]))),
                        ),
                    }
                }
            }
        }
    }
    Ok((ctor_params, ctor_args))
}

/// `impl KernelFunctor` for a launch type (`generics`: the impl's parameters, `ty`: the type):
/// submitting it launches its definition.
fn functor_impl(generics: TokenStream2, ty: TokenStream2) -> TokenStream2 {
    quote! {
        impl #generics ::sycl::KernelFunctor for #ty {
            fn submit(
                self,
                queue: &::sycl::Queue,
                range: ::sycl::Range,
                deps: &[&::sycl::Event],
            ) -> ::sycl::Result<::sycl::Event> {
                ::sycl::kernel::__rt::submit::<Self>(queue, range, deps, self.__sycl_args)
            }
        }
    }
}

fn helper_impl(item: syn::ItemFn, structs: &structs::Known) -> syn::Result<TokenStream2> {
    if !item.sig.generics.params.is_empty() || item.sig.generics.where_clause.is_some() {
        return generics::helper(item, structs);
    }
    let name = &item.sig.ident;
    let vis = &item.vis;
    let (rust, definition) = helper_instance(&item, &item.sig.ident.to_string(), structs)?;
    Ok(quote! {
        #rust

        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis struct #name {}

        const _: () = {
            // Not generic: one definition, whatever the types of a call (validated when the
            // program is linked).
            impl<K> ::sycl::kernel::__rt::KernelFn<K> for #name {
                fn definition() -> &'static ::sycl::kernel::__rt::HelperDef {
                    #definition
                }
            }
        };
    })
}

/// A helper without generic parameters (a generic helper's instance has its types
/// substituted; `shown`: its name in messages and programs): its native function and a
/// body that returns its definition.
fn helper_instance(
    item: &syn::ItemFn,
    shown: &str,
    structs: &structs::Known,
) -> syn::Result<(TokenStream2, TokenStream2)> {
    let f = parse::function(item, parse::Role::Helper, structs)?;
    analyze::check_common(&f)?;
    let mut fp64 = f.params.iter().any(|p| {
        matches!(
            p.kind,
            ParamKind::Scalar(Ty::F64) | ParamKind::Slice { elem: Ty::F64, .. }
        )
    }) || f.ret == Some(Ty::F64);
    analyze::visit_exprs(&f.body, &mut |e| {
        fp64 |= f.types.resolve(e.ty) == Some(Ty::F64);
    });
    let mut callees = Vec::new();
    analyze::collect_calls(&f, &mut callees);
    let bounds = bounds::Bounds::new(&f);
    let checked = encode::checked(&f, None, &bounds, false);
    let ir = words(&sycl_kernel_ir::wire::encode(&encode::resolved(
        &checked, &callees,
    )));
    let rust = emit_rust::helper_fn(&checked, &f.params, item);
    let helpers = helper_refs(&callees);
    let definition = quote! {
        #[allow(unsafe_code)]
        // SAFETY: the sources below are #[sycl::kernel_fn]'s translation of this helper.
        static DEFINITION: ::sycl::kernel::__rt::HelperDef = unsafe {
            ::sycl::kernel::__rt::HelperDef::new(::sycl::kernel::__rt::HelperParts {
                name: #shown,
                ir: #ir,
                helpers: #helpers,
                fp64: #fp64,
            })
        };
        &DEFINITION
    };
    Ok((rust, definition))
}
