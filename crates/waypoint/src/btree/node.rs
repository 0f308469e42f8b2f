//! Placeholder: being written (slotted node format).
