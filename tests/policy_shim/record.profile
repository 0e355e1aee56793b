# libnfcoll profile v1
# segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route
rec.body 2000 20 0.9000 0.9500 0.4000 0.3000 binary
rec.old 999 20 0.9000 0.9500 0.4000 0.3000 binary
