#[path = "../../layout/link.rs"]
mod layout;

fn main() {
    layout::link(&["galactic-cni"]);
}
