//! Structs in kernels: `#[derive(sycl::KernelType)]` and how a kernel learns their layout.
//!
//! A proc macro sees only its own item, so a kernel cannot read the definition of a struct it
//! takes. The derive leaves a `macro_rules!` macro beside the struct that passes the struct's
//! fields on, and makes it nameable by the struct's name (a macro and a type live in
//! different namespaces; `use path::Particle;` imports both). A kernel whose signature names a
//! struct it has no layout for expands to `Particle! { .. }` with its own tokens; that macro
//! calls `sycl::__kernel_with_types!` with the fields in front, which translates the kernel
//! (or asks the next struct the same way). Both sides compute the layout here, from the same
//! field list; the derive also asserts it against the compiler's (`size_of`, `offset_of!`).

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Error, Result};

use crate::ir::Ty;
use crate::parse::scalar_ty;

/// The most items an array field may have (each is a scalar on its own in kernels).
pub const MAX_ARRAY_FIELD: usize = 256;
/// The most fields a struct may have, array items counted one by one.
pub const MAX_SCALARS: usize = 1024;

/// A field of a kernel struct.
#[derive(Clone, Debug)]
pub struct FieldDef {
    pub name: String,
    /// Its scalar (an array field's element type).
    pub ty: Ty,
    /// Its byte offset in the struct.
    pub offset: u32,
    /// An array field's length.
    pub len: Option<u32>,
}

impl FieldDef {
    /// How many scalars it holds.
    pub fn scalars(&self) -> usize {
        self.len.unwrap_or(1) as usize
    }
}

/// A `#[repr(C)]` struct of scalars and scalar arrays, laid out as `repr(C)` lays it out.
#[derive(Clone, Debug)]
pub struct StructDef {
    pub name: String,
    pub size: u32,
    pub fields: Vec<FieldDef>,
}

/// The field name of a slice of arrays' element (`&[[f32; 4]]`): not a Rust name, so no
/// source names it.
pub const ITEMS: &str = "__sycl_items";

/// The element of a slice of arrays (`[f32; 4]`) as a struct of one array field, named as
/// the type.
pub fn array_element(a: &syn::TypeArray) -> Result<StructDef> {
    let (ty, len) = field_type(&syn::Type::Array(a.clone()))?;
    let len = len.expect("an array type");
    Ok(StructDef {
        name: format!("[{}; {len}]", ty.name()),
        size: ty.size() as u32 * len,
        fields: vec![FieldDef {
            name: ITEMS.into(),
            ty,
            offset: 0,
            len: Some(len),
        }],
    })
}

impl StructDef {
    /// Whether it is the element of a slice of arrays.
    pub fn is_array(&self) -> bool {
        self.fields.len() == 1 && self.fields[0].name == ITEMS
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&FieldDef> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field names, for messages.
    pub fn field_names(&self) -> String {
        self.fields
            .iter()
            .map(|f| format!("`{}`", f.name))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The scalars a kernel struct may hold (no `bool`, whose bytes may not be any value, and no
/// `usize`, whose width is the host's).
const FIELD_TYPES: &str = "i32, u32, i64, u64, f32, f64, f16, bf16 or an array `[T; N]` of them";

/// A field's type: a scalar, or an array of one with a literal length.
fn field_type(ty: &syn::Type) -> Result<(Ty, Option<u32>)> {
    let scalar = |t: &syn::Type| {
        scalar_ty(t)
            .filter(|t| t.is_element() && *t != Ty::Usize)
            .ok_or_else(|| {
                Error::new(
                    t.span(),
                    format!("a kernel struct's fields are {FIELD_TYPES}"),
                )
            })
    };
    match ty {
        syn::Type::Array(a) => {
            let elem = scalar(&a.elem)?;
            let len = match &a.len {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(n),
                    ..
                }) => n.base10_parse::<usize>().ok(),
                _ => None,
            }
            .filter(|n| (1..=MAX_ARRAY_FIELD).contains(n))
            .ok_or_else(|| {
                Error::new(
                    a.len.span(),
                    format!("an array field's length is a literal from 1 to {MAX_ARRAY_FIELD}"),
                )
            })?;
            Ok((elem, Some(len as u32)))
        }
        other => Ok((scalar(other)?, None)),
    }
}

/// The `repr(C)` layout of named fields: each at the next multiple of its scalar's size, the
/// size rounded up to the largest. Padding is refused (its bytes would be uninitialised, and
/// USM memory is read and written as plain bytes), with where it is and what to do.
pub fn layout(name: &syn::Ident, fields: &syn::FieldsNamed) -> Result<StructDef> {
    let mut out = Vec::new();
    let mut at = 0u32;
    let mut align = 1u32;
    let mut scalars = 0usize;
    for f in &fields.named {
        let ident = f.ident.as_ref().expect("named fields");
        let (ty, len) = field_type(&f.ty)?;
        let width = ty.size() as u32;
        if at % width != 0 {
            return Err(Error::new(
                f.span(),
                format!(
                    "`repr(C)` puts {} bytes of padding before `{ident}`, which kernels cannot \
                     copy: order the fields from the widest scalar down, or add a field of \
                     the padding's size",
                    width - at % width
                ),
            ));
        }
        align = align.max(width);
        out.push(FieldDef {
            name: ident.to_string(),
            ty,
            offset: at,
            len,
        });
        at += width * len.unwrap_or(1);
        scalars += len.unwrap_or(1) as usize;
    }
    if out.is_empty() {
        return Err(Error::new(
            name.span(),
            "a kernel struct has at least one field",
        ));
    }
    if scalars > MAX_SCALARS {
        return Err(Error::new(
            name.span(),
            format!("a kernel struct holds at most {MAX_SCALARS} scalars"),
        ));
    }
    if at % align != 0 {
        return Err(Error::new(
            name.span(),
            format!(
                "`repr(C)` pads `{name}` with {} bytes at the end, which kernels cannot copy: \
                 add a last field of that size",
                align - at % align
            ),
        ));
    }
    Ok(StructDef {
        name: name.to_string(),
        size: at,
        fields: out,
    })
}

/// The struct item the derive and the kernel both read: named fields, no generics.
fn struct_fields(item: &syn::DeriveInput) -> Result<&syn::FieldsNamed> {
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        return Err(Error::new(
            item.generics.span(),
            "a kernel struct cannot be generic",
        ));
    }
    match &item.data {
        syn::Data::Struct(syn::DataStruct {
            fields: syn::Fields::Named(f),
            ..
        }) => Ok(f),
        _ => Err(Error::new(
            item.ident.span(),
            "`KernelType` is for structs with named fields",
        )),
    }
}

fn is_repr_c(attrs: &[syn::Attribute]) -> bool {
    let mut c = false;
    for a in attrs.iter().filter(|a| a.path().is_ident("repr")) {
        let _ = a.parse_nested_meta(|m| {
            c |= m.path.is_ident("C");
            Ok(())
        });
    }
    c
}

/// The name of the macro the derive leaves, and under which it is imported.
fn callback_name(name: &syn::Ident) -> syn::Ident {
    format_ident!("__sycl_kernel_type_{}", name)
}

/// `#[derive(KernelType)]`.
pub fn derive(item: syn::DeriveInput) -> Result<TokenStream> {
    let name = &item.ident;
    if !is_repr_c(&item.attrs) {
        return Err(Error::new(
            name.span(),
            "a kernel struct is `#[repr(C)]`: devices lay it out as C does",
        ));
    }
    let fields = struct_fields(&item)?;
    let def = layout(name, fields)?;
    let size = def.size as usize;
    let offsets = def.fields.iter().map(|f| {
        let field = format_ident!("{}", f.name);
        let offset = f.offset as usize;
        let msg = format!("`{name}.{}` is not where `repr(C)` puts it", f.name);
        quote!(::core::assert!(::core::mem::offset_of!(#name, #field) == #offset, #msg);)
    });
    let size_msg = format!("`{name}` is not the size `repr(C)` makes it");
    // Each field's type, as written, is a kernel scalar (or an array of one) in fact, not
    // only by name: `f32` could name a type alias in scope. `sycl::Scalar` is sealed to the
    // eight types the layout assumes, every one `Pod`.
    let scalar_checks = fields.named.iter().map(|f| {
        let elem = match &f.ty {
            syn::Type::Array(a) => &*a.elem,
            other => other,
        };
        quote!(__sycl_is_scalar::<#elem>();)
    });
    // The fields as written (types and all), for the kernel macro to lay out the same way.
    let field_tokens = fields.named.iter().map(|f| {
        let ident = &f.ident;
        let ty = &f.ty;
        quote!(#ident: #ty)
    });
    let callback = callback_name(name);
    let vis = &item.vis;
    let parts = parts_key(&def);
    let size_u32 = def.size;
    let _ = vis;
    Ok(quote! {
        const _: () = {
            ::core::assert!(::core::mem::size_of::<#name>() == #size, #size_msg);
            #(#offsets)*
        };
        const _: fn() = || {
            fn __sycl_is_scalar<T: ::sycl::Scalar>() {}
            #(#scalar_checks)*
        };

        // SAFETY: `#[repr(C)]` (checked above) of fields that are each a `sycl::Scalar`
        // (checked above; all `Pod`) or an array of one, with no padding: the derive refused
        // any, and the assertions above tie its layout to the compiler's.
        #[allow(unsafe_code)]
        unsafe impl ::sycl::kernel::__rt::bytemuck::Zeroable for #name {}
        // SAFETY: as above.
        #[allow(unsafe_code)]
        unsafe impl ::sycl::kernel::__rt::bytemuck::Pod for #name {}
        // SAFETY: the layout below is the one asserted above.
        #[allow(unsafe_code)]
        unsafe impl ::sycl::KernelType for #name {
            #[doc(hidden)]
            const __SYCL_SIZE: u32 = #size_u32;
            #[doc(hidden)]
            const __SYCL_PARTS: u64 = #parts;
        }

        #[doc(hidden)]
        #[allow(unused_macros)]
        macro_rules! #callback {
            ($($rest:tt)*) => {
                ::sycl::__kernel_with_types! { [#name { #(#field_tokens),* }] $($rest)* }
            };
        }
        #[doc(hidden)]
        #[allow(unused_imports)]
        pub(crate) use #callback as #name;
    })
}

/// What a CPU view of a struct slice accesses: the width of every field if they share one,
/// else a key of the (offset, width) list with the top bit set (views of the same struct
/// access the same parts, so the same key lets them run together; any other width is
/// refused while they are live).
pub fn parts_key(def: &StructDef) -> u64 {
    let widths: Vec<u64> = def.fields.iter().map(|f| f.ty.size() as u64).collect();
    if widths.iter().all(|w| *w == widths[0]) {
        return widths[0];
    }
    // FNV-1a over (offset, width, count).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in &def.fields {
        for v in [f.offset as u64, f.ty.size() as u64, f.scalars() as u64] {
            h ^= v;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h | 1 << 63
}

/// The struct types a kernel's signature names (not scalars, not its type parameters), in
/// order of first appearance, each with a span where it is named.
pub fn named_structs(item: &syn::ItemFn) -> Vec<(String, Span)> {
    let generic: Vec<String> = item
        .sig
        .generics
        .type_params()
        .map(|t| t.ident.to_string())
        .collect();
    let mut out: Vec<(String, Span)> = Vec::new();
    for input in &item.sig.inputs {
        let syn::FnArg::Typed(pt) = input else {
            continue;
        };
        let mut ty = &*pt.ty;
        if let syn::Type::Reference(r) = ty {
            if let syn::Type::Slice(s) = &*r.elem {
                ty = &s.elem;
            }
        }
        if let syn::Type::Path(p) = ty {
            if p.qself.is_none() && scalar_ty(ty).is_none() {
                if let Some(id) = p.path.get_ident() {
                    let name = id.to_string();
                    // (Names that are never kernel structs get the parser's message.)
                    if !generic.contains(&name)
                        && !NOT_STRUCTS.contains(&name.as_str())
                        && !out.iter().any(|(n, _)| *n == name)
                    {
                        out.push((name, id.span()));
                    }
                }
            }
        }
    }
    out
}

/// Type names a kernel signature may hold that are never kernel structs: Rust's other
/// primitives and the prelude's types. The parser says what to write instead of them.
const NOT_STRUCTS: &[&str] = &[
    "char", "str", "i8", "u8", "i16", "u16", "i128", "u128", "isize", "String", "Vec", "Box",
    "Option", "Result",
];

/// `[Name { field: Type, .. }]`, one struct's fields as its derive passes them on.
struct Layout {
    name: syn::Ident,
    fields: syn::FieldsNamed,
}

impl Parse for Layout {
    fn parse(input: ParseStream) -> Result<Self> {
        let inner;
        syn::bracketed!(inner in input);
        Ok(Layout {
            name: inner.parse()?,
            fields: inner.parse()?,
        })
    }
}

/// `__kernel_with_types!`'s input: layouts, then `@kernel [attr] item`.
pub struct WithTypes {
    pub layouts: Vec<(syn::Ident, syn::FieldsNamed)>,
    pub attr: TokenStream,
    pub item: TokenStream,
}

impl Parse for WithTypes {
    fn parse(input: ParseStream) -> Result<Self> {
        let mut layouts = Vec::new();
        while input.peek(syn::token::Bracket) {
            let l: Layout = input.parse()?;
            layouts.push((l.name, l.fields));
        }
        input.parse::<syn::Token![@]>()?;
        let kw: syn::Ident = input.parse()?;
        if kw != "kernel" {
            return Err(Error::new(kw.span(), "expected `@kernel`"));
        }
        let attr;
        syn::bracketed!(attr in input);
        Ok(WithTypes {
            layouts,
            attr: attr.parse()?,
            item: input.parse()?,
        })
    }
}

/// The layouts known so far, by name.
pub type Known = HashMap<String, StructDef>;

/// Lays out the structs passed in; `Err` at the struct's name if one is not a kernel struct.
pub fn known(layouts: &[(syn::Ident, syn::FieldsNamed)]) -> Result<Known> {
    let mut out = Known::new();
    for (name, fields) in layouts {
        out.insert(name.to_string(), layout(name, fields)?);
    }
    Ok(out)
}

/// The expansion that asks struct `name` for its layout: the derive's macro, found by the
/// struct's name where the kernel names it, calls `__kernel_with_types!` with the layouts,
/// the attribute and the kernel.
pub fn ask(
    name: &str,
    span: Span,
    layouts: &[(syn::Ident, syn::FieldsNamed)],
    attr: &TokenStream,
    item: &syn::ItemFn,
) -> TokenStream {
    let mac = syn::Ident::new(name, span);
    let layouts = layouts.iter().map(|(n, f)| quote!([#n #f]));
    let item = item.to_token_stream();
    // If `name` does not derive `KernelType`, the macro is missing: this says why.
    let ty = syn::Ident::new(name, span);
    quote! {
        const _: fn() = || {
            fn __sycl_kernel_type<T: ::sycl::KernelType>() {}
            __sycl_kernel_type::<#ty>();
        };
        #mac! { #(#layouts)* @kernel [#attr] #item }
    }
}
