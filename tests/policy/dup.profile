# libnfcoll profile v1
# segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route
fc1.weight 200704 20 0.9312 0.9501 0.3671 0.3102 binary
head.weight 1280 20 0.4100 0.5200 0.9000 0.8000 fp32

fc1.weight 200704 20 0.9000 0.9000 0.3000 0.3000 ternary
