# libnfcoll profile v4
# segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route
fc1.weight 200704 20 0.9312 0.9501 0.3671 0.3102 binary
