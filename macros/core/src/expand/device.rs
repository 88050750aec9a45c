//! What a pipeline over several devices (`devices { ... }`) generates differently: `new`
//! takes one context per device and creates each stream, event, scratch buffer and kernel
//! on its own device, enables peer access between the devices it copies between, and the
//! step's events and progress words live on the device of the stream that uses them.
//!
//! A pipeline without a `devices` block has one device, the context `new` is given: none
//! of this applies, and the single-device expansion is unchanged.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::Ident;

use super::names::{Names, rt};
use crate::lower::{KernelId, Memory, Pipeline, StatementKind};

/// Whether the pipeline declares devices.
pub fn is_multi(pipeline: &Pipeline<'_>) -> bool {
    !pipeline.devices.is_empty()
}

/// The variable `new` binds device `d`'s context to (`d` over the devices one by one, a
/// device array's elements included).
pub fn device_param(d: usize) -> Ident {
    format_ident!("__device_{}", d)
}

/// How many devices the array that device `d` begins has (1 for a named device).
pub fn array_len(pipeline: &Pipeline<'_>, d: usize) -> usize {
    let mut first = 0;
    for device in pipeline.input.devices() {
        let len = crate::scope::array_len(device).unwrap_or(1);
        if first == d {
            return len;
        }
        first += len;
    }
    1
}

/// For each argument of a launch: whether it may be a peer's buffer (`peer(..)` names it),
/// and its name for the run-time check's messages.
pub fn launch_arg_devices(
    pipeline: &Pipeline<'_>,
    launch: &crate::ast::Launch,
    args: &[crate::lower::Arg],
) -> (Vec<bool>, Vec<String>) {
    args.iter()
        .map(|arg| match arg {
            crate::lower::Arg::Buffer { buffer, .. } => {
                let ident = pipeline.buffers[buffer.0].ident;
                let peer = launch.peer.as_ref().is_some_and(|p| p.names(ident));
                (peer, ident.to_string())
            }
            crate::lower::Arg::Scalar { .. } => (false, String::new()),
        })
        .unzip()
}

/// The devices a stage of `stream` may run on.
fn stream_devices(pipeline: &Pipeline<'_>, stream: usize) -> std::ops::Range<usize> {
    let stream = &pipeline.streams[stream];
    let len = if stream.per_device {
        array_len(pipeline, stream.device)
    } else {
        1
    };
    stream.device..stream.device + len
}

/// The `(kernel, device)` pairs the step launches; a kernel no stage launches is loaded on
/// the first device, so its declaration is still checked against the image.
pub fn kernel_instances(pipeline: &Pipeline<'_>) -> Vec<(KernelId, usize)> {
    let mut instances = BTreeSet::new();
    for stage in &pipeline.stages {
        for device in stream_devices(pipeline, stage.stream.0) {
            for statement in &stage.statements {
                if let StatementKind::Launch { kernel, .. } = &statement.kind {
                    instances.insert((kernel.0, device));
                }
            }
        }
    }
    for k in 0..pipeline.kernels.len() {
        if !instances.iter().any(|&(kernel, _)| kernel == k) {
            instances.insert((k, 0));
        }
    }
    instances
        .into_iter()
        .map(|(k, d)| (KernelId(k), d))
        .collect()
}

/// The pairs of devices that a `copy` goes between (each pair once, lower device first).
fn peer_pairs(pipeline: &Pipeline<'_>) -> BTreeSet<(usize, usize)> {
    let mut pairs = BTreeSet::new();
    for stage in &pipeline.stages {
        for statement in &stage.statements {
            if let StatementKind::Copy { src, dst, .. } = &statement.kind {
                let (a, b) = (&pipeline.buffers[src.0], &pipeline.buffers[dst.0]);
                if a.memory == Memory::Device && b.memory == Memory::Device && a.device != b.device
                {
                    pairs.insert((a.device.min(b.device), a.device.max(b.device)));
                }
            }
        }
    }
    pairs
}

/// The pairs (from, to) of devices a launch declared `peer(..)` reaches where the macro sees
/// both devices (a stage on one stream, a buffer on one device): `new` requires peer access
/// between them. Pairs that depend on a lane or an element are checked at each launch.
fn fixed_peer_pairs(pipeline: &Pipeline<'_>) -> BTreeSet<(usize, usize)> {
    let mut pairs = BTreeSet::new();
    for stage in &pipeline.stages {
        let stream = &pipeline.streams[stage.stream.0];
        if stream.per_device {
            continue;
        }
        for statement in &stage.statements {
            let StatementKind::Launch { source, args, .. } = &statement.kind else {
                continue;
            };
            let Some(peer) = &source.peer else {
                continue;
            };
            for arg in args.iter() {
                if let crate::lower::Arg::Buffer { buffer, .. } = arg {
                    let b = &pipeline.buffers[buffer.0];
                    if peer.names(b.ident) && !b.per_device && b.device != stream.device {
                        pairs.insert((stream.device, b.device));
                    }
                }
            }
        }
    }
    pairs
}

/// Whether any launch declares `peer(..)`.
fn any_peer(pipeline: &Pipeline<'_>) -> bool {
    pipeline.stages.iter().any(|stage| {
        stage.statements.iter().any(|statement| {
            matches!(&statement.kind, StatementKind::Launch { source, .. } if source.peer.is_some())
        })
    })
}

/// `new(gpu0: &Context, gpu1: &Context)` or `new(gpu: &[Context; 4])`: everything on its own
/// device.
pub fn new_fn(
    pipeline: &Pipeline<'_>,
    names: &Names,
    stream_init: impl Fn(usize, &Ident) -> TokenStream,
    module_load: impl Fn(usize, &Ident) -> TokenStream,
    kernel_init: impl Fn(KernelId, &Ident) -> TokenStream,
) -> TokenStream {
    let rt = rt();
    let kernels_ty = &names.kernels;
    let device_count = pipeline.devices.len();
    let params: Vec<Ident> = (0..device_count).map(device_param).collect();
    let ctx_of = |d: usize| &params[d.min(device_count - 1)];
    // Each declared device (or device array) is one parameter; every device one binding.
    let mut inputs = Vec::new();
    let mut bindings = Vec::new();
    let mut seen = BTreeSet::new();
    for device in pipeline.input.devices() {
        let name = &device.name;
        if !seen.insert(name.to_string()) {
            continue;
        }
        match crate::scope::array_len(device) {
            Some(n) => {
                inputs.push(quote!(#name: &[#rt::Context; #n]));
                for k in 0..n {
                    let var = &params[bindings.len().min(device_count - 1)];
                    bindings.push(quote!(let #var: &#rt::Context = &#name[#k];));
                }
            }
            None => {
                inputs.push(quote!(#name: &#rt::Context));
                let var = &params[bindings.len().min(device_count - 1)];
                bindings.push(quote!(let #var: &#rt::Context = #name;));
            }
        }
    }
    let origin = ctx_of(pipeline.streams[0].device);
    let stream_inits = pipeline.streams.iter().enumerate().map(|(i, stream)| {
        if !stream.per_device {
            return stream_init(i, ctx_of(stream.device));
        }
        // Lane `k` on the array's device `k`.
        let decl = super::step::stream_decl(pipeline, stream);
        let ctxs = stream_devices(pipeline, i).map(&ctx_of);
        quote!({
            let mut __lanes = ::std::vec::Vec::new();
            for __ctx in [#(#ctxs),*] {
                let __count = __lanes.len() + 1;
                #rt::ensure_streams(__ctx, &mut __lanes, #decl, __count)?;
            }
            __lanes
        })
    });
    let instances = kernel_instances(pipeline);
    let modules: BTreeSet<(usize, usize)> = instances
        .iter()
        .map(|&(k, d)| (pipeline.kernels[k.0].module.0, d))
        .collect();
    let module_loads = modules.iter().map(|&(m, d)| {
        let load = module_load(m, ctx_of(d));
        let var = module_var(m, d);
        quote!(let #var = #load?;)
    });
    let kernel_inits = instances.iter().map(|&(k, d)| {
        let field = names.kernel_field_on(k.0, d);
        let module = module_var(pipeline.kernels[k.0].module.0, d);
        let init = kernel_init(k, &module);
        quote!(#field: #init)
    });
    let peers = peer_pairs(pipeline).into_iter().map(|(a, b)| {
        let (a, b) = (ctx_of(a), ctx_of(b));
        quote!(#rt::enable_peer_access(#a, #b)?;)
    });
    // Kernels that reach a peer's memory: peer access on wherever the topology allows it,
    // and required between the pairs the macro can see.
    let name = pipeline.name.as_str();
    let kernel_peers = any_peer(pipeline).then(|| {
        let required = fixed_peer_pairs(pipeline).into_iter().map(|(from, to)| {
            let (a, b) = (ctx_of(from), ctx_of(to));
            let (a_name, b_name) = (&pipeline.devices[from], &pipeline.devices[to]);
            quote!(#rt::require_peer_access(#name, #a, #a_name, #b, #b_name)?;)
        });
        quote! {
            #(#required)*
            #rt::enable_all_peer_access(&[#(#params),*])?;
        }
    });
    let scratch_inits = pipeline.buffers.iter().filter(|b| b.scratch).map(|b| {
        let field = names.scratch_field(b.ident);
        if b.memory == Memory::Flag {
            let referent = b.referent;
            let ctx = ctx_of(b.device);
            quote!(#field: ::core::option::Option::Some(<#referent>::new(#ctx, 0)?))
        } else if b.memory == Memory::Condition {
            let ctx = ctx_of(b.device);
            quote!(#field: ::core::option::Option::Some(#rt::ConditionHandle::eager(#ctx)?))
        } else {
            quote!(#field: ::core::option::Option::None)
        }
    });
    let kinds = pipeline.kinds.len();
    let control_inits = super::control::field_inits(pipeline, origin);
    let doc = format!(
        "Creates the pipeline on its devices ({}), one context each, in the order \
         `devices {{ ... }}` declares them: each stream, event and scratch buffer on its own \
         device, its kernels loaded where they run, and peer access enabled between the \
         devices it copies between (where the topology allows; the driver stages the copies \
         otherwise). The streams of a stream array sized by a param are created before its \
         first step.",
        pipeline
            .devices
            .iter()
            .map(|d| format!("`{d}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    quote! {
        #[doc = #doc]
        pub fn new(#(#inputs),*) -> #rt::Result<Self> {
            #(#bindings)*
            #rt::check_devices(&[#(#params),*])?;
            #(#peers)*
            #kernel_peers
            #(#module_loads)*
            ::core::result::Result::Ok(Self {
                __ctx: #origin.clone(),
                __devices: [#(#params.clone()),*],
                __lanes: ::std::vec![#(#stream_inits),*],
                __fork: #rt::Event::with_flags(#origin, #rt::EventFlags::ORDERING)?,
                __progress: #rt::Progress::new(#origin, 0)?,
                __events: (0..#device_count).map(|_| ::std::vec::Vec::new()).collect(),
                __plans: ::std::vec![::core::option::Option::None; #kinds],
                __last: ::core::option::Option::None,
                __scratch_epoch: 0,
                __kernels: #kernels_ty { #(#kernel_inits,)* },
                #(#scratch_inits,)*
                #control_inits
            })
        }

        /// The contexts of the pipeline's devices, in the order `devices { ... }` declares them.
        pub fn devices(&self) -> &[#rt::Context] {
            &self.__devices
        }
    }
}

/// The variable a module loaded on device `d` is bound to in `new`.
pub fn module_var(m: usize, d: usize) -> Ident {
    if d == 0 {
        format_ident!("__module_{}", m)
    } else {
        format_ident!("__module_{}_on{}", m, d)
    }
}

/// The profiler of one step of `plan` (in `profile`): its events on each stage instance's
/// device.
pub fn profiler(pipeline: &Pipeline<'_>) -> TokenStream {
    let rt = rt();
    if !is_multi(pipeline) {
        return quote!(#rt::Profiler::new(&self.__ctx, plan.closed.stages.len())?);
    }
    quote! {{
        let mut __devices: ::std::vec::Vec<&#rt::Context> = ::std::vec::Vec::new();
        for __planned in &plan.closed.stages {
            let __ctx = plan
                .instances
                .get(__planned.stage.0)
                .and_then(|i| self.__lanes.get(i.decl).and_then(|lanes| lanes.get(i.lane)))
                .map_or(&self.__ctx, |stream| stream.context());
            __devices.push(__ctx);
        }
        #rt::Profiler::on_devices(&self.__ctx, &__devices)?
    }}
}

/// The context scratch buffer `b`'s memory is allocated in.
pub fn scratch_context(pipeline: &Pipeline<'_>, device: usize) -> TokenStream {
    if is_multi(pipeline) {
        quote!(&self.__devices[#device])
    } else {
        quote!(&self.__ctx)
    }
}
