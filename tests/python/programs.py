"""StableHLO programs the tests compile, as MLIR text."""

ADD_2x3 = """
func.func public @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %x, %y : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
"""

DOT_2x3_3x4 = """
func.func public @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
"""

ROW_SUM_4x5_F64 = """
func.func public @main(%x: tensor<4x5xf64>) -> tensor<4xf64> {
  %zero = stablehlo.constant dense<0.0> : tensor<f64>
  %0 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x5xf64>, tensor<f64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}
"""

SUM_AND_PRODUCT_I32 = """
func.func public @main(%x: tensor<3xi32>, %y: tensor<3xi32>) -> (tensor<3xi32>, tensor<3xi32>) {
  %s = stablehlo.add %x, %y : tensor<3xi32>
  %p = stablehlo.multiply %x, %y : tensor<3xi32>
  return %s, %p : tensor<3xi32>, tensor<3xi32>
}
"""

SCALAR_F32 = """
func.func public @main(%x: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.multiply %x, %x : tensor<f32>
  return %0 : tensor<f32>
}
"""

# x <- tanh(x @ x / n), `steps` times (a .format template): a program still
# running when its argument's Array is deleted.
MATMUL_TANH_LOOP = """
func.func public @main(%x: tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32> {{
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %y = %x) : tensor<i32>, tensor<{n}x{n}xf32>
    cond {{
      %steps = stablehlo.constant dense<{steps}> : tensor<i32>
      %c = stablehlo.compare LT, %i, %steps : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }} do {{
      %one = stablehlo.constant dense<1> : tensor<i32>
      %next = stablehlo.add %i, %one : tensor<i32>
      %p = stablehlo.dot_general %y, %y, contracting_dims = [1] x [0] : (tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>
      %scale = stablehlo.constant dense<{inv_n}> : tensor<{n}x{n}xf32>
      %q = stablehlo.multiply %p, %scale : tensor<{n}x{n}xf32>
      %t = stablehlo.tanh %q : tensor<{n}x{n}xf32>
      stablehlo.return %next, %t : tensor<i32>, tensor<{n}x{n}xf32>
    }}
  return %r#1 : tensor<{n}x{n}xf32>
}}
"""

# (a a + a)(a a + a) of a 256 x 256 matrix: one temporary of the
# argument's size, which the second product reads.
SQUARED_SUM_256 = """
func.func public @main(%a: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %b = stablehlo.dot_general %a, %a, contracting_dims = [1] x [0] : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %c = stablehlo.add %b, %a : tensor<256x256xf32>
  %d = stablehlo.dot_general %c, %c, contracting_dims = [1] x [0] : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  return %d : tensor<256x256xf32>
}
"""
