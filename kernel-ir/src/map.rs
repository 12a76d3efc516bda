//! A function carried from one [`Stage`] to another: the tree's structure is walked here,
//! once; what each node carries in the new stage comes from a [`StageMap`].

use crate::ir::*;

/// The facts of a loop header in stage `S`.
pub struct ForFacts<S: Stage> {
    /// [`For::counts_below_half`].
    pub counts_below_half: S::Fact,
    /// [`For::start_below_half`].
    pub start_below_half: S::Fact,
    /// [`For::counts_in_u32`].
    pub counts_in_u32: S::Fact,
    /// [`For::counts_in_u64`].
    pub counts_in_u64: S::Fact,
    /// [`For::counts_in_i32`].
    pub counts_in_i32: S::Fact,
    /// [`For::start_per_item`].
    pub start_per_item: S::Flag,
}

/// What a node carries in stage `B`, from the node in stage `A` (which the callbacks may
/// inspect whole: the bounds analysis answers from the expressions themselves).
pub trait StageMap<A: Stage, B: Stage> {
    /// A type.
    fn ty(&mut self, t: &A::Ty) -> B::Ty;
    /// A literal of type `t`.
    fn lit(&mut self, l: &A::Lit, t: &A::Ty) -> B::Lit;
    /// A call's target (`args`: the call's arguments, `ret`: its type).
    fn callee(&mut self, c: &A::Callee, args: &[Expr<A>], ret: &A::Ty) -> B::Callee;
    /// A node's source.
    fn src(&mut self, s: &A::Src) -> B::Src;
    /// What else is known of a local.
    fn local_info(&mut self, l: &Local<A>) -> B::LocalInfo;
    /// An element access's check and its index's [`ExprKind::Load::index_fits_i32`].
    fn access(
        &mut self,
        base: Base,
        index: &Expr<A>,
        check: &A::Access,
        fits_i32: &A::Fact,
    ) -> (B::Access, B::Fact);
    /// An array field item's check (`item` is the whole item, its index in stage `A`).
    fn field_item(&mut self, item: &FieldItem<A>) -> B::Access;
    /// The fact of binary operation `e`.
    fn binary(&mut self, e: &Expr<A>, fact: &A::Fact) -> B::Fact;
    /// The facts of loop header `h`.
    fn for_facts(&mut self, h: &For<A>) -> ForFacts<B>;
}

/// `f` in stage `B`.
pub fn map_function<A: Stage, B: Stage>(
    f: &Function<A>,
    m: &mut impl StageMap<A, B>,
) -> Function<B> {
    let mut m = Mapper(m);
    Function {
        params: f.params.clone(),
        ret: f.ret,
        locals: f
            .locals
            .iter()
            .map(|l| Local {
                ty: m.0.ty(&l.ty),
                array: l.array,
                info: m.0.local_info(l),
            })
            .collect(),
        body: m.block(&f.body),
        steps: f.steps.as_ref().map(|s| m.steps(s)),
    }
}

struct Mapper<'m, M>(&'m mut M);

impl<M> Mapper<'_, M> {
    fn block<A: Stage, B: Stage>(&mut self, body: &[Stmt<A>]) -> Vec<Stmt<B>>
    where
        M: StageMap<A, B>,
    {
        body.iter().map(|s| self.stmt(s)).collect()
    }

    fn for_header<A: Stage, B: Stage>(&mut self, h: &For<A>) -> Box<For<B>>
    where
        M: StageMap<A, B>,
    {
        let facts = self.0.for_facts(h);
        Box::new(For {
            var: h.var,
            start: self.expr(&h.start),
            end: self.expr(&h.end),
            inclusive: h.inclusive,
            step: h.step.as_ref().map(|s| self.expr(s)),
            counts_below_half: facts.counts_below_half,
            start_below_half: facts.start_below_half,
            counts_in_u32: facts.counts_in_u32,
            counts_in_u64: facts.counts_in_u64,
            counts_in_i32: facts.counts_in_i32,
            start_per_item: facts.start_per_item,
        })
    }

    fn stmt<A: Stage, B: Stage>(&mut self, s: &Stmt<A>) -> Stmt<B>
    where
        M: StageMap<A, B>,
    {
        let kind = match &s.kind {
            StmtKind::Let(l, e) => StmtKind::Let(*l, self.expr(e)),
            StmtKind::AssignLocal(l, op, e) => StmtKind::AssignLocal(*l, *op, self.expr(e)),
            StmtKind::Store {
                base,
                check,
                index_fits_i32,
                op,
                index,
                value,
                field,
            } => {
                let (check, index_fits_i32) = self.0.access(*base, index, check, index_fits_i32);
                StmtKind::Store {
                    base: *base,
                    check,
                    index_fits_i32,
                    op: *op,
                    index: self.expr(index),
                    value: self.expr(value),
                    field: self.field(field),
                }
            }
            StmtKind::CopyField {
                param,
                check,
                index_fits_i32,
                index,
                offset,
                array,
                to_slice,
            } => {
                let (check, index_fits_i32) =
                    self.0
                        .access(Base::Param(*param), index, check, index_fits_i32);
                StmtKind::CopyField {
                    param: *param,
                    check,
                    index_fits_i32,
                    index: self.expr(index),
                    offset: *offset,
                    array: *array,
                    to_slice: *to_slice,
                }
            }
            StmtKind::Expr(e) => StmtKind::Expr(self.expr(e)),
            StmtKind::If(c, a, b) => StmtKind::If(self.expr(c), self.block(a), self.block(b)),
            StmtKind::While(c, b) => StmtKind::While(self.expr(c), self.block(b)),
            StmtKind::Loop(b) => StmtKind::Loop(self.block(b)),
            StmtKind::For(h, b) => StmtKind::For(self.for_header(h), self.block(b)),
            StmtKind::Break => StmtKind::Break,
            StmtKind::Continue => StmtKind::Continue,
            StmtKind::Return(e) => StmtKind::Return(e.as_ref().map(|e| self.expr(e))),
            StmtKind::Barrier => StmtKind::Barrier,
            StmtKind::Fence(o, sc) => StmtKind::Fence(*o, *sc),
            StmtKind::Fail(f) => StmtKind::Fail(*f),
        };
        Stmt {
            kind,
            src: self.0.src(&s.src),
        }
    }

    fn steps<A: Stage, B: Stage>(&mut self, steps: &[Step<A>]) -> Vec<Step<B>>
    where
        M: StageMap<A, B>,
    {
        steps
            .iter()
            .map(|s| match s {
                Step::Region(b) => Step::Region(self.block(b)),
                Step::GroupLet(l, e) => Step::GroupLet(*l, self.expr(e)),
                Step::Barrier => Step::Barrier,
                Step::Group { local, op, args } => Step::Group {
                    local: *local,
                    op: *op,
                    args: self.exprs(args),
                },
                Step::SyncFor(h, body) => Step::SyncFor(self.for_header(h), self.steps(body)),
                Step::SubGroup { local, op, args } => Step::SubGroup {
                    local: *local,
                    op: *op,
                    args: self.exprs(args),
                },
            })
            .collect()
    }

    fn field<A: Stage, B: Stage>(&mut self, f: &Option<Box<Field<A>>>) -> Option<Box<Field<B>>>
    where
        M: StageMap<A, B>,
    {
        let f = f.as_ref()?;
        Some(Box::new(Field {
            ty: self.0.ty(&f.ty),
            offset: f.offset,
            item: f.item.as_ref().map(|item| FieldItem {
                len: item.len,
                check: self.0.field_item(item),
                index: self.expr(&item.index),
            }),
        }))
    }

    fn exprs<A: Stage, B: Stage>(&mut self, es: &[Expr<A>]) -> Vec<Expr<B>>
    where
        M: StageMap<A, B>,
    {
        es.iter().map(|e| self.expr(e)).collect()
    }

    fn expr<A: Stage, B: Stage>(&mut self, e: &Expr<A>) -> Expr<B>
    where
        M: StageMap<A, B>,
    {
        let kind = match &e.kind {
            ExprKind::Lit(l) => ExprKind::Lit(self.0.lit(l, &e.ty)),
            ExprKind::Local(l) => ExprKind::Local(*l),
            ExprKind::Param(i) => ExprKind::Param(*i),
            ExprKind::Load {
                base,
                check,
                index_fits_i32,
                index,
                field,
            } => {
                let (check, index_fits_i32) = self.0.access(*base, index, check, index_fits_i32);
                ExprKind::Load {
                    base: *base,
                    check,
                    index_fits_i32,
                    index: Box::new(self.expr(index)),
                    field: self.field(field),
                }
            }
            ExprKind::Len(b) => ExprKind::Len(*b),
            ExprKind::Unary(op, a) => ExprKind::Unary(*op, Box::new(self.expr(a))),
            ExprKind::Binary(op, a, b, fact) => {
                let fact = self.0.binary(e, fact);
                ExprKind::Binary(*op, Box::new(self.expr(a)), Box::new(self.expr(b)), fact)
            }
            ExprKind::Cast(a) => ExprKind::Cast(Box::new(self.expr(a))),
            ExprKind::Math(m, args) => ExprKind::Math(*m, self.exprs(args)),
            ExprKind::Query(q, d) => ExprKind::Query(*q, *d),
            ExprKind::Atomic {
                op,
                base,
                index,
                values,
                order,
                scope,
            } => ExprKind::Atomic {
                op: *op,
                base: *base,
                index: Box::new(self.expr(index)),
                values: self.exprs(values),
                order: *order,
                scope: *scope,
            },
            ExprKind::Group(op, args) => ExprKind::Group(*op, self.exprs(args)),
            ExprKind::SubGroupQuery(q) => ExprKind::SubGroupQuery(*q),
            ExprKind::ConstParam(i) => ExprKind::ConstParam(*i),
            ExprKind::SliceArg(p) => ExprKind::SliceArg(*p),
            ExprKind::ArrayArg(l) => ExprKind::ArrayArg(*l),
            ExprKind::SubGroup(op, args) => ExprKind::SubGroup(*op, self.exprs(args)),
            ExprKind::Call(c, args) => {
                ExprKind::Call(self.0.callee(c, args, &e.ty), self.exprs(args))
            }
            ExprKind::Select(c, a, b) => ExprKind::Select(
                Box::new(self.expr(c)),
                Box::new(self.expr(a)),
                Box::new(self.expr(b)),
            ),
        };
        Expr {
            ty: self.0.ty(&e.ty),
            kind,
            src: self.0.src(&e.src),
        }
    }
}
