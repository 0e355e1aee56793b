# libnfcoll profile v1
# segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route
fc1.weight 200704 10 0.9312 0.9501 0.3671 0.3102 binary
fc1.bias 256 10 0.4400 0.8102 0.8123 0.6044 ternary
fc2.weight 32768 10 0.8811 0.9020 0.4620 0.4311 binary
fc2.bias 128 10 0.3900 0.4500 0.9210 0.8870 fp32
head.weight 1280 10 0.4100 0.5200 0.9000 0.8000 fp32
head.bias 10 10 0.2000 0.3000 0.9900 0.9500 fp32
buffer:4096 1024 10 0.8700 0.8900 0.6000 0.5500 binary
