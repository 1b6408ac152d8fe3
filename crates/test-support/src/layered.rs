//! The 10 000-stage layered workflow that the hostile tests and the compile
//! benchmark read (`bench/gen_layered.py` writes the same file).

use std::fmt::Write as _;

/// Layers in the workflow.
pub const LAYERS: usize = 100;
/// Stages in each layer.
pub const WIDTH: usize = 100;

/// The top of the workflow, up to and including `stages:`.
pub const HEADER: &str =
    "name: hostile\nversion: \"1\"\ndescription: d\ntrigger:\n  source: manual\nstages:\n";

/// The name of stage `index` of `layer`, zero-padded so that name order and
/// numeric order agree.
#[must_use]
pub fn name(layer: usize, index: usize) -> String {
    format!("s{layer:03}-{index:03}")
}

/// One stage as a block-sequence item under `stages:`.
#[must_use]
pub fn stage(name: &str, depends_on: &[&str]) -> String {
    format!(
        "  - name: {name}\n    kind: gather\n    description: d {name}\n    agent: {{role: researcher}}\n    depends_on: [{}]\n",
        depends_on.join(", ")
    )
}

/// `LAYERS` layers of `WIDTH` stages, each depending on two stages of the
/// previous layer, written last layer first and each layer scrambled, so a
/// correct plan cannot come from file order.
#[must_use]
pub fn workflow() -> String {
    let mut text = String::with_capacity(LAYERS * WIDTH * 160);
    text.push_str(HEADER);
    for layer in (0..LAYERS).rev() {
        for slot in 0..WIDTH {
            // 37 is coprime with 100, so this visits every index once.
            let index = slot * 37 % WIDTH;
            let this = name(layer, index);
            let depends_on = if layer == 0 {
                Vec::new()
            } else {
                vec![name(layer - 1, index), name(layer - 1, (index + 1) % WIDTH)]
            };
            let depends_on: Vec<&str> = depends_on.iter().map(String::as_str).collect();
            let _ = write!(text, "{}", stage(&this, &depends_on));
        }
    }
    text
}
